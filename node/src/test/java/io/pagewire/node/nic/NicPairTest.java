package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import io.pagewire.node.TestData;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class NicPairTest {
    private final DirectLink link = new DirectLink();
    private final KernelAgent kernelA = KernelAgent.start(new KernelContext().name("a").physicalMemoryBytes(4 << 20).swapBytes(16 << 20));
    private final KernelAgent kernelB = KernelAgent.start(new KernelContext().name("b").physicalMemoryBytes(4 << 20).swapBytes(16 << 20));
    private final Nic a = new Nic("a", kernelA, new NicContext().ackTimeoutNs(20_000_000), NicTimers.threaded("a"), link.transportFor("a"));
    private final Nic b = new Nic("b", kernelB, new NicContext().ackTimeoutNs(20_000_000), NicTimers.threaded("b"), link.transportFor("b"));

    NicPairTest() {
        link.add("a", a);
        link.add("b", b);
    }

    @AfterEach
    void close() {
        a.close();
        b.close();
        link.close();
        kernelA.close();
        kernelB.close();
    }

    /** An endpoint on each NIC with a queue pair between them, connected both ways. */
    private record Pair(Endpoint ea, Endpoint eb, CompletionQueue cqa, QueuePair qa, QueuePair qb) {
    }

    private Pair connectedPair() {
        Endpoint ea = a.openEndpoint("a");
        Endpoint eb = b.openEndpoint("b");
        CompletionQueue cqa = a.createCompletionQueue();
        QueuePair qa = a.createQueuePair(ea, cqa);
        QueuePair qb = b.createQueuePair(eb, b.createCompletionQueue());
        qa.connect(qb.address());
        qb.connect(qa.address());
        return new Pair(ea, eb, cqa, qa, qb);
    }

    @Test
    void writeThenReadBackInEveryMode() throws Exception {
        for (RegistrationMode mode : RegistrationMode.values()) {
            Pair pair = connectedPair();
            Endpoint ea = pair.ea();
            Endpoint eb = pair.eb();
            CompletionQueue cqa = pair.cqa();
            QueuePair qa = pair.qa();
            QueuePair qb = pair.qb();
            int len = 300_000;
            long src = ea.space().allocate(len);
            long back = ea.space().allocate(len);
            long dst = eb.space().allocate(len + 10);
            byte[] data = new byte[len];
            new Random(mode.ordinal()).nextBytes(data);
            ea.space().store(src, data, 0, len);
            MemoryRegion ra = ea.register(src, len, mode, Access.all());
            MemoryRegion rback = ea.register(back, len, mode, Access.all());
            MemoryRegion rb = eb.register(dst, len + 10, mode, Access.all());
            qa.post(WorkRequest.write(1, ra.lkey(), src, len, dst + 7, rb.rkey()));
            Completion c = cqa.take(10, TimeUnit.SECONDS);
            assertThat(c).as(mode + " write").isNotNull();
            assertThat(c.status()).as(mode + ": " + c.error() + "\n" + qa.describe() + "\n" + qb.describe() + "\nA:\n" + a.counters() + kernelA.counters() + "B:\n" + b.counters() + kernelB.counters()).isEqualTo(CompletionStatus.SUCCESS);
            byte[] out = new byte[len];
            eb.space().load(dst + 7, out, 0, len);
            assertThat(out).as(mode + " data at responder").isEqualTo(data);
            qa.post(WorkRequest.read(2, rback.lkey(), back, len, dst + 7, rb.rkey()));
            c = cqa.take(10, TimeUnit.SECONDS);
            assertThat(c).as(mode + " read").isNotNull();
            assertThat(c.status()).as(mode + ": " + c.error()).isEqualTo(CompletionStatus.SUCCESS);
            ea.space().load(back, out, 0, len);
            assertThat(out).as(mode + " data read back").isEqualTo(data);
            ea.close();
            eb.close();
        }
        assertThat(kernelA.stats().pinnedPages()).isZero();
        assertThat(kernelB.stats().pinnedPages()).isZero();
    }

    /**
     * An MTU above the page size: a packet's payload spans pages on both sides (wrapped where each
     * part lies on the way out, scattered page by page on the way in), in every mode, at odd
     * addresses, and every frame locked for it is let go.
     */
    @Test
    void packetsLargerThanAPageCarryEveryPartOfEveryPage() throws Exception {
        NicContext bigMtu = new NicContext().mtuBytes(16384).ackTimeoutNs(20_000_000);
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(8 << 20), new KernelContext().physicalMemoryBytes(8 << 20),
                bigMtu, new NicContext().mtuBytes(16384).ackTimeoutNs(20_000_000))) {
            int id = 0;
            for (RegistrationMode mode : RegistrationMode.values()) {
                int len = 100_003;
                long src = nics.ea.space().allocate(len + 3);
                long back = nics.ea.space().allocate(len);
                long dst = nics.eb.space().allocate(len + 10);
                byte[] data = new byte[len];
                new Random(mode.ordinal()).nextBytes(data);
                nics.ea.space().store(src + 3, data, 0, len);
                MemoryRegion ra = nics.ea.register(src, len + 3, mode, Access.all());
                MemoryRegion rback = nics.ea.register(back, len, mode, Access.all());
                MemoryRegion rb = nics.eb.register(dst, len + 10, mode, Access.all());
                nics.qa.post(WorkRequest.write(++id, ra.lkey(), src + 3, len, dst + 7, rb.rkey()));
                nics.takeSuccess(nics.cqa, mode + " write of 16 KiB packets");
                byte[] out = new byte[len];
                nics.eb.space().load(dst + 7, out, 0, len);
                assertThat(out).as(mode + " data at responder").isEqualTo(data);
                nics.qa.post(WorkRequest.read(++id, rback.lkey(), back, len, dst + 7, rb.rkey()));
                nics.takeSuccess(nics.cqa, mode + " read of 16 KiB packets");
                nics.ea.space().load(back, out, 0, len);
                assertThat(out).as(mode + " data read back").isEqualTo(data);
                nics.ea.deregister(ra);
                nics.ea.deregister(rback);
                nics.eb.deregister(rb);
                int sourcePages = (int) (((src + 3 + len - 1) >>> 12) - (src >>> 12) + 1);
                assertThat(nics.ea.space().pageOut(src, len + 3)).as(mode + ": every source page left memory, none still locked for DMA")
                        .isEqualTo(sourcePages);
            }
            assertThat(nics.kernelA.stats().pinnedPages()).isZero();
            assertThat(nics.kernelB.stats().pinnedPages()).isZero();
        }
    }

    @Test
    void unsignalledRequestsCompleteSilentlyUnlessTheyFail() throws Exception {
        Pair pair = connectedPair();
        Endpoint ea = pair.ea();
        Endpoint eb = pair.eb();
        CompletionQueue cqa = pair.cqa();
        QueuePair qa = pair.qa();
        long src = ea.space().allocate(8192);
        long dst = eb.space().allocate(8192);
        MemoryRegion ra = ea.register(src, 8192, RegistrationMode.PINNED, Access.all());
        MemoryRegion rb = eb.register(dst, 8192, RegistrationMode.PINNED, Access.all());
        for (int i = 1; i <= 9; i++) {
            qa.post(WorkRequest.write(i, ra.lkey(), src, 100, dst, rb.rkey()).unsignaled());
        }
        qa.post(WorkRequest.write(10, ra.lkey(), src, 100, dst, rb.rkey()));
        Completion signalled = cqa.take(10, TimeUnit.SECONDS);
        assertThat(signalled).isNotNull();
        assertThat(signalled.wrId()).as("the only completion of ten writes is the signalled one").isEqualTo(10);
        assertThat(cqa.poll()).isNull();
        assertThat(a.counters().get(NicCounter.WRITES_COMPLETED)).as("all ten are counted").isEqualTo(10);

        qa.post(WorkRequest.write(11, ra.lkey(), src, 100, dst, rb.rkey() + 1).unsignaled());
        Completion failed = cqa.take(10, TimeUnit.SECONDS);
        assertThat(failed).as("a failed unsignalled request completes").isNotNull();
        assertThat(failed.wrId()).isEqualTo(11);
        assertThat(failed.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        ea.close();
        eb.close();
    }

    @Test
    void aThrowingCounterHandlerDoesNotMakeTheNotificationCountTwice() throws Exception {
        Pair pair = connectedPair();
        long src = pair.ea().space().allocate(4096);
        long dst = pair.eb().space().allocate(4096);
        MemoryRegion ra = pair.ea().register(src, 4096, RegistrationMode.SHADOW, Access.all());
        MemoryRegion rb = pair.eb().register(dst, 4096, RegistrationMode.SHADOW, Access.all());
        EventCounter counter = pair.eb().createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        List<Long> seen = new CopyOnWriteArrayList<>();
        counter.addHandler(value -> {
            throw new IllegalStateException("the application's handler is broken");
        });
        counter.addHandler(seen::add);
        pair.qa().post(WorkRequest.writeWithNotify(1, ra.lkey(), src, 64, dst, rb.rkey(), counter.id()));
        Completion c = pair.cqa().take(10, TimeUnit.SECONDS);
        assertThat(c).isNotNull();
        assertThat(c.status()).as(c.error()).isEqualTo(CompletionStatus.SUCCESS);
        // A retransmission (ack timeout 20 ms) sent before the acknowledgement came would reach B as a duplicate:
        // wait until B has seen as many as A sent, so a second application would have happened by now.
        TestData.awaitTrue(() -> b.counters().get(NicCounter.DUPLICATE_PACKETS) >= retransmitted(a), 10_000,
                "B received every retransmission A sent");
        assertThat(counter.value()).as("one write, one notification").isEqualTo(1);
        assertThat(seen).as("the other handler still ran, once").containsExactly(1L);
        assertThat(b.counters().get(NicCounter.DROPPED_PACKETS)).isZero();
    }

    private static long retransmitted(Nic nic) {
        long sum = 0;
        for (NicCounter counter : NicCounter.RETRANSMISSIONS) {
            sum += nic.counters().get(counter);
        }
        return sum;
    }
}
