package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelContext;
import io.pagewire.proto.fabric.Opcode;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * FETCH_ADD and COMPARE_SWAP on 8-byte words of registered memory: in every mode, on a target page
 * that was paged out, exactly once when their acknowledgements are lost, and refused when the word is
 * misaligned or the region lacks REMOTE_ATOMIC.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MemoryAtomicsTest {
    private static final int RESPONDER_MEMORY = 1 << 20;

    private final TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20),
            new KernelContext().physicalMemoryBytes(RESPONDER_MEMORY).swapBytes(16 << 20),
            new NicContext().ackTimeoutNs(5_000_000).retryCount(100).rnrDelayNs(1_000_000), new NicContext().tlbEntries(64));
    private final DirectLink link = nics.link;
    private final Nic a = nics.a;
    private final Nic b = nics.b;
    private final Endpoint eb = nics.eb;
    private final CompletionQueue cq = nics.cqa;
    private final QueuePair qa = nics.qa;

    @AfterEach
    void close() {
        nics.close();
    }

    private Completion run(WorkRequest request) throws InterruptedException {
        qa.post(request);
        return nics.take(cq, request.toString());
    }

    private long word(long address) {
        byte[] bytes = new byte[8];
        eb.space().load(address, bytes, 0, 8);
        return ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void fetchAddAndCompareSwapActOnTheWordInEveryMode(RegistrationMode mode) throws Exception {
        long base = eb.space().allocate(8192);
        MemoryRegion region = eb.register(base, 8192, mode, Access.all());
        long at = base + 4096 + 64;
        Completion added = run(WorkRequest.fetchAdd(1, at, region.rkey(), 5));
        assertThat(added.status()).as(added.error()).isEqualTo(CompletionStatus.SUCCESS);
        assertThat(added.opcode()).isEqualTo(Completion.Opcode.FETCH_ADD);
        assertThat(added.value()).isZero();
        assertThat(word(at)).isEqualTo(5);

        Completion missed = run(WorkRequest.compareSwap(2, at, region.rkey(), 4, 100));
        assertThat(missed.value()).as("the word before, unchanged when it differs").isEqualTo(5);
        assertThat(word(at)).isEqualTo(5);
        Completion swapped = run(WorkRequest.compareSwap(3, at, region.rkey(), 5, -1));
        assertThat(swapped.opcode()).isEqualTo(Completion.Opcode.COMPARE_SWAP);
        assertThat(swapped.value()).isEqualTo(5);
        assertThat(word(at)).isEqualTo(-1);
        assertThat(word(at - 8)).as("neighbouring words are untouched").isZero();
        assertThat(word(at + 8)).isZero();
        assertThat(a.counters().get(NicCounter.ATOMICS_COMPLETED)).isEqualTo(3);
    }

    @ParameterizedTest
    @EnumSource(value = RegistrationMode.class, names = {"PIN_ON_MISS", "SHADOW", "ON_DEMAND"})
    void anAtomicOnAPagedOutWordFaultsItInFirst(RegistrationMode mode) throws Exception {
        long base = eb.space().allocate(4096);
        MemoryRegion region = eb.register(base, 4096, mode, Access.all());
        eb.space().store(base, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(0, 41));
        long ballast = eb.space().allocate(2L * RESPONDER_MEMORY);
        for (long p = ballast; p < ballast + 2L * RESPONDER_MEMORY; p += 4096) {
            eb.space().touch(p, true);
        }
        assertThat(eb.space().isResident(base >>> 12)).as("the word's page was paged out").isFalse();
        Completion c = run(WorkRequest.fetchAdd(1, base, region.rkey(), 1));
        assertThat(c.status()).as(c.error()).isEqualTo(CompletionStatus.SUCCESS);
        assertThat(c.value()).isEqualTo(41);
        assertThat(word(base)).isEqualTo(42);
        if (mode != RegistrationMode.PIN_ON_MISS) {
            assertThat(b.counters().get(NicCounter.RNR_NAKS_SENT)).as("the requester was told to come back").isPositive();
        }
    }

    @Test
    void atomicsRunExactlyOnceWhenTheirAnswersAreLost() throws Exception {
        long base = eb.space().allocate(4096);
        MemoryRegion region = eb.register(base, 4096, RegistrationMode.ON_DEMAND, Access.all());
        link.drop = p -> p.getOpcode() == Opcode.ATOMIC_ACKNOWLEDGE && ThreadLocalRandom.current().nextInt(4) == 0;
        int n = 300;
        Set<Long> results = new HashSet<>();
        for (int i = 0; i < n; i++) {
            qa.post(WorkRequest.fetchAdd(i, base, region.rkey(), 1));
        }
        for (int i = 0; i < n; i++) {
            Completion c = cq.take(20, TimeUnit.SECONDS);
            assertThat(c).as("completion " + i + "\n" + qa.describe()).isNotNull();
            assertThat(c.status()).as(c.error()).isEqualTo(CompletionStatus.SUCCESS);
            assertThat(c.wrId()).isEqualTo(i);
            results.add(c.value());
        }
        assertThat(word(base)).as("each FETCH_ADD added once, retransmissions answered from the replay cache").isEqualTo(n);
        assertThat(results).as("each saw a different value").hasSize(n);
        assertThat(b.counters().get(NicCounter.DUPLICATE_PACKETS)).as("some were sent again").isPositive();
    }

    @Test
    void misalignedWordsAndRegionsWithoutRemoteAtomicAreRefused() throws Exception {
        long base = eb.space().allocate(4096);
        MemoryRegion writable = eb.register(base, 4096, RegistrationMode.PINNED, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_WRITE));
        assertThatThrownBy(() -> qa.post(WorkRequest.fetchAdd(1, base + 4, writable.rkey(), 1)))
                .isInstanceOf(NicException.class).hasMessageContaining("8-byte aligned");
        Completion c = run(WorkRequest.compareSwap(2, base, writable.rkey(), 0, 1));
        assertThat(c.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(c.error()).contains("does not allow REMOTE_ATOMIC");
        assertThat(word(base)).isZero();
    }
}
