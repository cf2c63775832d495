package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelContext;
import io.pagewire.kernel.StorageModel;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A SEND spends receive credits only where the responder's receive buffers may park it (its endpoint
 * has SHADOW regions, as its acknowledgements say): SENDs into pinned buffers are paced by nothing but
 * the link, and a SEND that spent none and parks anyway (a SHADOW region registered since) stays within
 * the credits the responder holds and is granted nothing back, so later senders are not over-granted.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SendCreditsTest {
    /** Two MTU-sized SEND packets' worth: a sender charged for its SENDs waits for grants all the time. */
    private static final int CREDITS = 4;

    // Swap reads on b take 1 ms, so parked parts stay parked while the rest of a burst arrives.
    private final TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20),
            new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(16 << 20).swapDevice(StorageModel.RAM.withLatencyNs(1_000_000)),
            new NicContext().ackTimeoutNs(20_000_000).rnrDelayNs(500_000), new NicContext().creditsPerQp(CREDITS));

    @AfterEach
    void close() {
        nics.close();
    }

    @Test
    void sendsIntoBuffersThatCannotParkWaitForNoCredits() throws Exception {
        byte[] data = bytes(256 << 10, 1);
        MemoryRegion from = source(data);
        long dst = nics.eb.space().allocate(data.length);
        MemoryRegion to = nics.eb.register(dst, data.length, RegistrationMode.PINNED, Access.all());
        exchangeOne(from, to, dst); // the first acknowledgement says nothing of b's parks

        long waits = nics.a.counters().get(NicCounter.CREDIT_WAITS);
        nics.qb.postReceive(new ReceiveRequest(2, to.lkey(), dst, data.length));
        nics.qa.post(WorkRequest.send(2, from.lkey(), from.address(), data.length));
        nics.takeSuccess(nics.cqa, "the 256 KiB send");
        assertThat(nics.takeSuccess(nics.cqb, "its receive").bytes()).isEqualTo(data.length);
        assertThat(load(dst, data.length)).isEqualTo(data);
        assertThat(nics.a.counters().get(NicCounter.CREDIT_WAITS) - waits)
                .as("64 packets into a pinned buffer, with " + CREDITS + " credits a pair: no wait for them" + nics.state()).isZero();
    }

    @Test
    void aSendThatSpentNoCreditsParksWithinTheGrantAndLeavesNoCreditBehind() throws Exception {
        byte[] data = bytes(64 << 10, 2);
        MemoryRegion from = source(data);
        long pinned = nics.eb.space().allocate(4096);
        MemoryRegion pinnedRegion = nics.eb.register(pinned, 4096, RegistrationMode.PINNED, Access.all());
        exchangeOne(from, pinnedRegion, pinned); // b has no SHADOW region: a's SENDs spend nothing from here on

        // Now b registers a SHADOW buffer and its pages go out: a does not know yet, and its SEND lands there.
        long dst = nics.eb.space().allocate(data.length);
        MemoryRegion shadow = nics.eb.register(dst, data.length, RegistrationMode.SHADOW, Access.all());
        nics.eb.space().store(dst, new byte[data.length], 0, data.length);
        assertThat(nics.eb.space().pageOut(dst, data.length)).as("every receive page out: every part parks").isEqualTo(16);
        nics.qb.postReceive(new ReceiveRequest(2, shadow.lkey(), dst, data.length));
        nics.qa.post(WorkRequest.send(2, from.lkey(), from.address(), data.length));
        nics.takeSuccess(nics.cqa, "the send that spent no credits");
        assertThat(nics.takeSuccess(nics.cqb, "its receive").bytes()).isEqualTo(data.length);
        assertThat(load(dst, data.length)).isEqualTo(data);
        assertThat(nics.kernelB.systemBuffer().peakSlotsInUse()).as("parked within the pair's credits" + nics.state())
                .isLessThanOrEqualTo(CREDITS);

        // What it parked was granted nothing: a's credits are b's again, so a WRITE burst that parks every part
        // stays within them (charged, it waits for credits) and draws no RNR NAK.
        assertThat(nics.eb.space().pageOut(dst, data.length)).isEqualTo(16);
        long rnr = nics.b.counters().get(NicCounter.RNR_NAKS_SENT);
        nics.qa.post(WorkRequest.write(3, from.lkey(), from.address(), data.length, dst, shadow.rkey()));
        nics.takeSuccess(nics.cqa, "the write into parked pages");
        assertThat(load(dst, data.length)).isEqualTo(data);
        assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT) - rnr).as("no overrun of b's credits" + nics.state()).isZero();

        // And now that b's acknowledgements say its receives park, a's next SEND there spends credits again.
        assertThat(nics.eb.space().pageOut(dst, data.length)).isEqualTo(16);
        long waits = nics.a.counters().get(NicCounter.CREDIT_WAITS);
        rnr = nics.b.counters().get(NicCounter.RNR_NAKS_SENT);
        nics.qb.postReceive(new ReceiveRequest(4, shadow.lkey(), dst, data.length));
        nics.qa.post(WorkRequest.send(4, from.lkey(), from.address(), data.length));
        nics.takeSuccess(nics.cqa, "the send that spends credits");
        nics.takeSuccess(nics.cqb, "its receive");
        assertThat(load(dst, data.length)).isEqualTo(data);
        assertThat(nics.a.counters().get(NicCounter.CREDIT_WAITS) - waits).as("it waited for credits" + nics.state()).isPositive();
        assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT) - rnr).as("and drew no RNR NAK" + nics.state()).isZero();
    }

    /** One small SEND from {@code from} into {@code to} at {@code dst}, so that an acknowledgement has said whether b's receives park. */
    private void exchangeOne(MemoryRegion from, MemoryRegion to, long dst) throws InterruptedException {
        nics.qb.postReceive(new ReceiveRequest(1, to.lkey(), dst, 4096));
        nics.qa.post(WorkRequest.send(1, from.lkey(), from.address(), 64));
        nics.takeSuccess(nics.cqa, "the first send");
        nics.takeSuccess(nics.cqb, "the first receive");
    }

    private MemoryRegion source(byte[] data) {
        long src = nics.ea.space().allocate(data.length);
        nics.ea.space().store(src, data, 0, data.length);
        return nics.ea.register(src, data.length, RegistrationMode.PINNED, Access.all());
    }

    private byte[] load(long address, int length) {
        byte[] landed = new byte[length];
        nics.eb.space().load(address, landed, 0, length);
        return landed;
    }

    private static byte[] bytes(int length, int seed) {
        byte[] b = new byte[length];
        new Random(seed).nextBytes(b);
        return b;
    }
}
