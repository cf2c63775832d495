package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelContext;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A shared receive queue feeding two queue pairs: each SEND takes the next posted receive whichever
 * pair it arrives on and completes on that pair's queue, the low watermark fires once per arming, and
 * a shared queue in use cannot be destroyed.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SharedReceiveQueueTest {
    private final TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20), new KernelContext().physicalMemoryBytes(4 << 20),
            new NicContext().rnrDelayNs(1_000_000), new NicContext());
    private final Nic a = nics.a;
    private final Nic b = nics.b;

    @AfterEach
    void close() {
        nics.close();
    }

    @Test
    void twoQueuePairsDrawFromOnePoolAndTheLowWatermarkFiresOnce() throws Exception {
        Endpoint ea = nics.ea;
        Endpoint eb = nics.eb;
        SharedReceiveQueue srq = eb.createSharedReceiveQueue();
        CompletionQueue cqa = a.createCompletionQueue();
        CompletionQueue cqb1 = b.createCompletionQueue();
        CompletionQueue cqb2 = b.createCompletionQueue();
        QueuePair qa1 = a.createQueuePair(ea, cqa);
        QueuePair qa2 = a.createQueuePair(ea, cqa);
        QueuePair qb1 = b.createQueuePair(eb, cqb1, srq);
        QueuePair qb2 = b.createQueuePair(eb, cqb2, srq);
        qa1.connect(qb1.address());
        qb1.connect(qa1.address());
        qa2.connect(qb2.address());
        qb2.connect(qa2.address());
        assertThatThrownBy(() -> qb1.postReceive(new ReceiveRequest(0, 1, 0, 1))).isInstanceOf(NicException.class)
                .hasMessageContaining("post them there");

        int buffers = 8;
        long pool = eb.space().allocate(buffers * 256L);
        MemoryRegion poolRegion = eb.register(pool, buffers * 256L, RegistrationMode.ON_DEMAND, Access.all());
        for (int i = 0; i < buffers; i++) {
            srq.post(new ReceiveRequest(i, poolRegion.lkey(), pool + i * 256L, 256));
        }
        AtomicInteger limitEvents = new AtomicInteger();
        srq.arm(3, limitEvents::incrementAndGet);

        long src = ea.space().allocate(64);
        ea.space().store(src, new byte[] {9}, 0, 1);
        MemoryRegion srcRegion = ea.register(src, 64, RegistrationMode.PINNED, Access.all());
        for (int i = 0; i < 6; i++) {
            QueuePair via = i % 2 == 0 ? qa1 : qa2;
            via.post(WorkRequest.send(i, srcRegion.lkey(), src, 64));
            Completion sent = cqa.take(10, TimeUnit.SECONDS);
            assertThat(sent).isNotNull();
            assertThat(sent.status()).as(sent.error()).isEqualTo(CompletionStatus.SUCCESS);
        }
        Set<Long> consumed = new HashSet<>();
        for (CompletionQueue cq : List.of(cqb1, cqb2)) {
            for (int i = 0; i < 3; i++) {
                Completion r = cq.take(10, TimeUnit.SECONDS);
                assertThat(r).isNotNull();
                assertThat(r.qpn()).as("a receive completes on the queue pair the SEND came in on").isEqualTo(cq == cqb1 ? qb1.qpn() : qb2.qpn());
                consumed.add(r.wrId());
            }
        }
        assertThat(consumed).as("the six oldest receives, shared between the pairs").containsExactlyInAnyOrder(0L, 1L, 2L, 3L, 4L, 5L);
        assertThat(srq.posted()).isEqualTo(2);
        assertThat(limitEvents.get()).as("the watermark fired once, when fewer than 3 stayed posted").isEqualTo(1);
        srq.arm(5, limitEvents::incrementAndGet);
        assertThat(limitEvents.get()).as("armed below the count already: it fires at once").isEqualTo(2);

        assertThatThrownBy(srq::destroy).isInstanceOf(NicException.class).hasMessageContaining("still used by 2");
        qb1.close();
        qb2.close();
        assertThat(srq.destroy()).extracting(ReceiveRequest::wrId).containsExactly(6L, 7L);
        assertThat(eb.sharedReceiveQueue(srq.id())).isNull();
    }

    /**
     * Several queue pairs on one shared receive queue, each with a WRITE_WITH_IMM in flight, race for
     * its one posted receive, on several delivery threads as a node's lanes deliver: the winner's data
     * lands with its receive, the others are answered RNR NAK and come again once the next receive is
     * posted. A responder that checked for a receive, placed the data, then took the receive lost it to
     * another pair in between (a NullPointerException, the packet dropped after its data had landed).
     */
    @Test
    void writesWithImmediateDataRacingForTheLastReceiveEachTakeOneAndLandOnce() throws Exception {
        int pairs = 8;
        int rounds = 25;
        try (TwoNics racing = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20), new KernelContext().physicalMemoryBytes(4 << 20),
                new NicContext(), new NicContext().rnrDelayNs(200_000), 4)) {
            Endpoint ea = racing.ea;
            Endpoint eb = racing.eb;
            SharedReceiveQueue srq = eb.createSharedReceiveQueue();
            CompletionQueue sent = racing.a.createCompletionQueue();
            CompletionQueue received = racing.b.createCompletionQueue();
            List<QueuePair> senders = new ArrayList<>();
            for (int i = 0; i < pairs; i++) {
                QueuePair from = racing.a.createQueuePair(ea, sent);
                QueuePair to = racing.b.createQueuePair(eb, received, srq);
                from.connect(to.address());
                to.connect(from.address());
                senders.add(from);
            }
            long target = eb.space().allocate(pairs * 4096L);
            MemoryRegion targetRegion = eb.register(target, pairs * 4096L, RegistrationMode.PINNED, Access.all());
            long receiveBuffer = eb.space().allocate(4096);
            MemoryRegion receiveRegion = eb.register(receiveBuffer, 4096, RegistrationMode.PINNED, Access.all());
            long src = ea.space().allocate(pairs * 4096L);
            MemoryRegion srcRegion = ea.register(src, pairs * 4096L, RegistrationMode.PINNED, Access.all());

            Set<Long> immediates = new HashSet<>();
            for (int round = 0; round < rounds; round++) {
                for (int i = 0; i < pairs; i++) {
                    byte[] data = new byte[512];
                    Arrays.fill(data, (byte) (round * pairs + i));
                    ea.space().store(src + i * 4096L, data, 0, data.length);
                }
                srq.post(new ReceiveRequest(round * pairs, receiveRegion.lkey(), receiveBuffer, 4096));
                for (int i = 0; i < pairs; i++) {
                    senders.get(i).post(WorkRequest.writeWithImm(round * pairs + i, srcRegion.lkey(), src + i * 4096L, 512,
                            target + i * 4096L, targetRegion.rkey(), round * pairs + i));
                }
                for (int done = 0; done < pairs; done++) {
                    Completion r = racing.take(received, "receive " + done + " of round " + round);
                    assertThat(r.status()).as(r.error() + racing.state()).isEqualTo(CompletionStatus.SUCCESS);
                    assertThat(r.bytes()).as("the receive reports the write's length").isEqualTo(512);
                    assertThat(immediates.add((long) r.immediate())).as("immediate %d delivered twice", r.immediate()).isTrue();
                    byte[] landed = new byte[512];
                    int index = r.immediate() % pairs;
                    eb.space().load(target + index * 4096L, landed, 0, 512);
                    assertThat(landed).as("the data of the write whose receive completed").containsOnly((byte) r.immediate());
                    if (done < pairs - 1) {
                        srq.post(new ReceiveRequest(round * pairs + done + 1, receiveRegion.lkey(), receiveBuffer, 4096));
                    }
                }
                for (int i = 0; i < pairs; i++) {
                    Completion w = racing.takeSuccess(sent, "write of round " + round);
                    assertThat(w.opcode()).isEqualTo(Completion.Opcode.WRITE_WITH_IMM);
                }
            }
            assertThat(immediates).hasSize(pairs * rounds);
            assertThat(racing.b.counters().get(NicCounter.DROPPED_PACKETS)).as("no packet dropped after its data landed" + racing.state()).isZero();
            assertThat(racing.b.counters().get(NicCounter.RNR_NAKS_SENT)).as("the losers of each race were answered RNR NAK").isPositive();
            assertThat(srq.posted()).isZero();
        }
    }
}
