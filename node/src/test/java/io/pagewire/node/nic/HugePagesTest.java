package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Nodes with 2 MiB pages: writes, reads and SENDs across huge pages in every mode, a SHADOW receive
 * into a paged-out huge page parked in 64 KiB slots, and the TLB-reach effect that makes huge pages
 * worth having (the same sweep misses once per 2 MiB instead of once per 4 KiB).
 */
class HugePagesTest {
    private static final int HUGE = 2 << 20;

    /** Two NICs whose kernels use {@code pageSize} pages and a 4 MiB system buffer. */
    private static TwoNics pair(int pageSize, long memory, NicContext nic) {
        return new TwoNics(kernel(pageSize, memory), kernel(pageSize, memory), nic, nic);
    }

    private static KernelContext kernel(int pageSize, long memory) {
        return new KernelContext().pageSizeBytes(pageSize).physicalMemoryBytes(memory).swapBytes(4 * memory).systemBufferBytes(4 << 20);
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void writesReadsAndSendsCrossHugePagesInEveryMode(RegistrationMode mode) throws Exception {
        try (TwoNics p = pair(HUGE, 64L << 20, new NicContext().ackTimeoutNs(50_000_000))) {
            int len = 5 << 20;
            byte[] data = new byte[len];
            new Random(mode.ordinal()).nextBytes(data);
            long src = p.ea.space().allocate(len + HUGE);
            long back = p.ea.space().allocate(len + HUGE);
            long dst = p.eb.space().allocate(2L * len + HUGE);
            p.ea.space().store(src + 777, data, 0, len);
            MemoryRegion rs = p.ea.register(src, len + HUGE, mode, Access.all());
            MemoryRegion rback = p.ea.register(back, len + HUGE, mode, Access.all());
            MemoryRegion rd = p.eb.register(dst, 2L * len + HUGE, mode, Access.all());

            p.qa.post(WorkRequest.write(1, rs.lkey(), src + 777, len, dst + 4095, rd.rkey()));
            p.takeSuccess(p.cqa, "the request");
            byte[] landed = new byte[len];
            p.eb.space().load(dst + 4095, landed, 0, len);
            assertThat(landed).as("written across three huge pages").isEqualTo(data);

            p.qa.post(WorkRequest.read(2, rback.lkey(), back + 1, len, dst + 4095, rd.rkey()));
            p.takeSuccess(p.cqa, "the request");
            p.ea.space().load(back + 1, landed, 0, len);
            assertThat(landed).as("read back").isEqualTo(data);

            p.qb.postReceive(new ReceiveRequest(3, rd.lkey(), dst + len + 13, len + 100));
            p.qa.post(WorkRequest.send(4, rs.lkey(), src + 777, len));
            p.takeSuccess(p.cqa, "the request");
            assertThat(p.takeSuccess(p.cqb, "the receive").bytes()).isEqualTo(len);
            p.eb.space().load(dst + len + 13, landed, 0, len);
            assertThat(landed).as("sent into a posted buffer across huge pages").isEqualTo(data);
        }
    }

    @Test
    void aShadowWriteIntoAPagedOutHugePageParksIn64KiBSlots() throws Exception {
        try (TwoNics p = pair(HUGE, 32L << 20, new NicContext().ackTimeoutNs(50_000_000))) {
            assertThat(p.kernelB.systemBuffer().slotBytes()).isEqualTo(64 << 10);
            long dst = p.eb.space().allocate(HUGE);
            MemoryRegion rd = p.eb.register(dst, HUGE, RegistrationMode.SHADOW, Access.all());
            p.eb.space().store(dst, new byte[] {1}, 0, 1);
            long ballast = p.eb.space().allocate(48L << 20);
            for (long at = ballast; at < ballast + (48L << 20); at += HUGE) {
                p.eb.space().touch(at, true);
            }
            assertThat(p.eb.space().isResident(dst >>> p.eb.space().pageShift())).as("the target huge page was paged out").isFalse();
            int len = 256 << 10;
            byte[] data = new byte[len];
            new Random(5).nextBytes(data);
            long src = p.ea.space().allocate(len);
            p.ea.space().store(src, data, 0, len);
            MemoryRegion rs = p.ea.register(src, len, RegistrationMode.PINNED, Access.all());
            p.qa.post(WorkRequest.write(1, rs.lkey(), src, len, dst + 1000, rd.rkey()));
            p.takeSuccess(p.cqa, "the request");
            assertThat(p.b.counters().get(NicCounter.PARKED_PARTS)).as("parts parked while the huge page came in").isPositive();
            byte[] landed = new byte[len];
            p.eb.space().load(dst + 1000, landed, 0, len);
            assertThat(landed).isEqualTo(data);
        }
    }

    @Test
    void hugePagesExtendTheTlbsReach() throws Exception {
        long sweep = 16L << 20;
        long hugeMisses = sweepMisses(HUGE, sweep);
        long smallMisses = sweepMisses(4096, sweep);
        assertThat(hugeMisses).as("a 16 MiB sweep misses once per 2 MiB page").isLessThanOrEqualTo(2 * sweep / HUGE);
        assertThat(smallMisses).as("and once per 4 KiB page").isGreaterThanOrEqualTo(sweep / 4096);
    }

    /** TLB misses at the responder of a sweep of 64 KiB ON_DEMAND writes over {@code bytes} with a 16-entry TLB. */
    private static long sweepMisses(int pageSize, long bytes) throws Exception {
        try (TwoNics p = pair(pageSize, 64L << 20, new NicContext().ackTimeoutNs(50_000_000).tlbEntries(16).tlbWays(4))) {
            int chunk = 64 << 10;
            long src = p.ea.space().allocate(chunk);
            p.ea.space().store(src, new byte[chunk], 0, chunk);
            MemoryRegion rs = p.ea.register(src, chunk, RegistrationMode.PINNED, Access.all());
            long dst = p.eb.space().allocate(bytes);
            MemoryRegion rd = p.eb.register(dst, bytes, RegistrationMode.ON_DEMAND, Access.all());
            p.eb.advise(rd, dst, bytes, Endpoint.Advice.PREFETCH_WRITE).get(30, TimeUnit.SECONDS);
            long before = p.b.counters().get(NicCounter.TLB_MISSES);
            for (long at = 0; at < bytes; at += chunk) {
                p.qa.post(WorkRequest.write(at, rs.lkey(), src, chunk, dst + at, rd.rkey()));
                p.takeSuccess(p.cqa, "the request");
            }
            return p.b.counters().get(NicCounter.TLB_MISSES) - before;
        }
    }

    @Test
    void anMtuLargerThanASlotIsRefusedWithHugePages() {
        try (KernelAgent kernel = KernelAgent.start(new KernelContext().name("k").pageSizeBytes(HUGE).physicalMemoryBytes(64L << 20)
                .systemBufferBytes(4 << 20))) {
            assertThatThrownBy(() -> new Nic("k", kernel, new NicContext().mtuBytes(1 << 20), NicTimers.threaded("k"), null))
                    .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pagewire.nic.mtuBytes must be at most 65536");
        }
    }
}
