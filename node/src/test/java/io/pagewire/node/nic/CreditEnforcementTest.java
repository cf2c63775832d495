package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelContext;
import io.pagewire.kernel.StorageModel;
import io.pagewire.node.TestData;
import java.util.Arrays;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The system-buffer credit window is the responder's, not whatever an address claims: a window too
 * small to send one packet is refused at connect, and a sender that claims more than it was granted
 * is held to the grant (RNR NAKs) instead of taking the shared buffer from other queue pairs.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class CreditEnforcementTest {
    @Test
    void anAddressGrantingTooFewOrAbsurdlyManyCreditsIsRefusedAtConnect() {
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(1 << 20), new KernelContext().physicalMemoryBytes(1 << 20),
                new NicContext(), new NicContext())) {
            QueuePair fresh = nics.a.createQueuePair(nics.ea, nics.cqa);
            QpAddress real = nics.qb.address();
            for (int credits : new int[] {0, 1, -5, Integer.MAX_VALUE}) {
                assertThatThrownBy(() -> fresh.connect(new QpAddress(real.node(), real.qpn(), credits, real.pageSize())))
                        .as(credits + " credits").isInstanceOf(NicException.class).hasMessageContaining("give the address CreateQueuePair returned");
            }
            assertThat(fresh.state()).isEqualTo(QueuePairState.INIT);
        }
    }

    @Test
    void aSenderClaimingMoreCreditsThanGrantedIsHeldToTheGrant() throws Exception {
        int granted = 8;
        // Swap reads on b take 1 ms, so a parked page stays parked while the rest of the burst arrives: the
        // overrun (and its RNR) does not depend on whether b drains its buffer faster than a sends (it did,
        // once in CI, with swap as fast as memory).
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20),
                new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(16 << 20).swapDevice(StorageModel.RAM.withLatencyNs(1_000_000)),
                new NicContext().ackTimeoutNs(20_000_000).rnrDelayNs(500_000), new NicContext().creditsPerQp(granted))) {
            // A second pair whose requester was told the responder grants 100,000 credits.
            QueuePair greedy = nics.a.createQueuePair(nics.ea, nics.cqa);
            QueuePair victim = nics.b.createQueuePair(nics.eb, nics.cqb);
            QpAddress real = victim.address();
            greedy.connect(new QpAddress(real.node(), real.qpn(), 100_000, real.pageSize()));
            victim.connect(greedy.address());

            int pages = 64;
            byte[] data = new byte[pages * 4096];
            new Random(1).nextBytes(data);
            long src = nics.ea.space().allocate(data.length);
            nics.ea.space().store(src, data, 0, data.length);
            MemoryRegion from = nics.ea.register(src, data.length, RegistrationMode.PINNED, Access.all());
            long dst = nics.eb.space().allocate(data.length);
            MemoryRegion to = nics.eb.register(dst, data.length, RegistrationMode.SHADOW, Access.all());
            byte[] before = new byte[data.length];
            Arrays.fill(before, (byte) 7);
            nics.eb.space().store(dst, before, 0, before.length);
            assertThat(nics.eb.space().pageOut(dst, data.length)).as("every destination page out: every part parks").isEqualTo(pages);
            greedy.post(WorkRequest.write(1, from.lkey(), src, data.length, dst, to.rkey()));
            nics.takeSuccess(nics.cqa, "the greedy write");
            byte[] landed = new byte[data.length];
            nics.eb.space().load(dst, landed, 0, landed.length);
            assertThat(landed).isEqualTo(data);
            assertThat(nics.kernelB.systemBuffer().peakSlotsInUse()).as("never more parked than the grant" + nics.state())
                    .isLessThanOrEqualTo(granted);
            assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).as("the overrun was answered with RNR").isPositive();
        }
    }

    @Test
    void aFailedQueuePairGivesItsShareOfTheSystemBufferBack() throws Exception {
        // Room for two pairs' first grants on b: TwoNics' own pair and one more.
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(1 << 20),
                new KernelContext().physicalMemoryBytes(1 << 20).systemBufferBytes(4 * 4096),
                new NicContext().ackTimeoutNs(20_000_000), new NicContext().creditsPerQp(8))) {
            QueuePair doomed = nics.b.createQueuePair(nics.eb, nics.cqb);
            assertThatThrownBy(() -> nics.b.createQueuePair(nics.eb, nics.cqb)).isInstanceOf(NicException.class)
                    .hasMessageContaining("no receive credits left");
            QueuePair peer = nics.a.createQueuePair(nics.ea, nics.cqa);
            doomed.connect(peer.address());
            peer.connect(doomed.address());
            long src = nics.eb.space().allocate(4096);
            MemoryRegion from = nics.eb.register(src, 4096, RegistrationMode.PINNED, Access.all());
            doomed.post(WorkRequest.write(1, from.lkey(), src, 4096, 0x1000, 424242));
            Completion failed = nics.take(nics.cqb, "the write with a made-up rkey");
            assertThat(failed.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
            assertThat(doomed.state()).isEqualTo(QueuePairState.ERROR);
            // The completion can reach the queue a moment before the failing NIC thread hands the credits back.
            TestData.awaitTrue(() -> nics.b.creditsGranted() == 2, 10_000, "the failed pair's credits came back");
            QueuePair next = nics.b.createQueuePair(nics.eb, nics.cqb);
            assertThat(next.state()).as("created with the failed pair's credits").isEqualTo(QueuePairState.INIT);
            doomed.close();
            assertThatThrownBy(() -> nics.b.createQueuePair(nics.eb, nics.cqb)).as("closing a failed pair returns nothing twice")
                    .isInstanceOf(NicException.class).hasMessageContaining("no receive credits left");
        }
    }

    @Test
    void aPairReceivingIntoShadowPagesBorrowsItsShareAndTheBufferBoundsWhatIsLent() throws Exception {
        // b's buffer: 24 slots. Its own pair starts with the 2 credits one packet needs; a second pair takes 2 more.
        int share = 16;
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20),
                new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(16 << 20).systemBufferBytes(24 * 4096),
                new NicContext().ackTimeoutNs(20_000_000), new NicContext().creditsPerQp(share))) {
            QueuePair second = nics.b.createQueuePair(nics.eb, nics.cqb);
            QueuePair secondPeer = nics.a.createQueuePair(nics.ea, nics.cqa);
            second.connect(secondPeer.address());
            secondPeer.connect(second.address());
            assertThat(nics.b.creditsGranted()).as("first grants only").isEqualTo(4);

            int pages = 64;
            byte[] data = new byte[pages * 4096];
            new Random(2).nextBytes(data);
            long src = nics.ea.space().allocate(data.length);
            nics.ea.space().store(src, data, 0, data.length);
            MemoryRegion from = nics.ea.register(src, data.length, RegistrationMode.PINNED, Access.all());
            long[] dst = new long[2];
            MemoryRegion[] to = new MemoryRegion[2];
            for (int i = 0; i < 2; i++) {
                dst[i] = nics.eb.space().allocate(data.length);
                nics.eb.space().store(dst[i], new byte[data.length], 0, data.length);
                to[i] = nics.eb.register(dst[i], data.length, RegistrationMode.SHADOW, Access.all());
                assertThat(nics.eb.space().pageOut(dst[i], data.length)).isEqualTo(pages);
            }
            nics.qa.post(WorkRequest.write(1, from.lkey(), src, data.length, dst[0], to[0].rkey()));
            secondPeer.post(WorkRequest.write(2, from.lkey(), src, data.length, dst[1], to[1].rkey()));
            nics.takeSuccess(nics.cqa, "one write");
            nics.takeSuccess(nics.cqa, "the other write");
            for (int i = 0; i < 2; i++) {
                byte[] landed = new byte[data.length];
                nics.eb.space().load(dst[i], landed, 0, landed.length);
                assertThat(landed).as("write " + i).isEqualTo(data);
            }
            assertThat(nics.qb.credits().held() + second.credits().held()).as("both borrowed; together no more than the buffer" + nics.state())
                    .isGreaterThan(4).isLessThanOrEqualTo(24);
            assertThat(nics.qb.credits().held()).isLessThanOrEqualTo(share);
            assertThat(second.credits().held()).isLessThanOrEqualTo(share);
            assertThat(nics.b.creditsGranted()).isEqualTo(nics.qb.credits().held() + second.credits().held());
            assertThat(nics.kernelB.systemBuffer().peakSlotsInUse()).isLessThanOrEqualTo(24);
            second.close();
            assertThat(nics.b.creditsGranted()).as("a closed pair gives back all it borrowed").isEqualTo(nics.qb.credits().held());
        }
    }
}
