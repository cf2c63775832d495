package io.pagewire.node.cluster;

import static io.pagewire.node.TestData.pattern;
import static io.pagewire.node.TestData.crc;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.fabric.LinkStats;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionStatus;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A cut link loses packets in flight; once it heals the lanes come back and what was unacknowledged is replayed. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
abstract class LinkFailureSuite extends ClusterFixture {
    private static final int SLOT = 4096;
    private static final int WRITES = 400;

    @Test
    void writesInFlightWhenTheLinkIsCutCompleteAfterItHeals() throws Exception {
        start(2, context -> context.nic().ackTimeoutNs(20_000_000L).retryCount(200)
                .sendWindowPackets(16).readRequestPackets(8));
        Connection c = connect(cluster.node(1), cluster.node(2));
        long length = (long) WRITES * SLOT;
        long src = c.local().space().allocate(length);
        long dst = c.remote().space().allocate(length);
        MemoryRegion srcRegion = c.local().register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = c.remote().register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
        c.local().space().store(src, pattern(9, (int) length), 0, (int) length);
        // Slow every batch a little so that writes are in flight when the cable is pulled.
        cluster.node(1).fabric().faults().delay(1_000_000L, 0);
        for (int i = 0; i < WRITES; i++) {
            c.qp().post(WorkRequest.write(i, srcRegion.lkey(), src + (long) i * SLOT, SLOT, dst + (long) i * SLOT, dstRegion.rkey()));
        }
        for (int i = 0; i < 20; i++) {
            awaitSuccess(c.cq());
        }
        cluster.node(1).fabric().cut("node-2");
        assertThat(cluster.node(1).fabric().connectedPeers()).doesNotContain("node-2");
        Thread.sleep(100);
        cluster.node(1).fabric().heal("node-2");
        for (int i = 20; i < WRITES; i++) {
            Completion done = awaitSuccess(c.cq());
            assertThat(done.wrId()).isEqualTo(i);
        }
        assertThat(cluster.node(1).nic().counters().get(NicCounter.RETRANSMITTED_PACKETS)).as("lost packets were replayed").isPositive();
        byte[] landed = new byte[(int) length];
        c.remote().space().load(dst, landed, 0, (int) length);
        assertThat(crc(landed)).isEqualTo(crc(pattern(9, (int) length)));
        LinkStats link = cluster.node(1).fabric().links().get("node-2");
        assertThat(link.lanesLost()).isPositive();
        assertThat(link.lanesOpened()).as("lanes came back after the heal").isGreaterThan(link.lanesLost());
    }

    /** A pair that gives up quickly, with one slot registered on each side. */
    private record OneSlot(Connection c, MemoryRegion src, MemoryRegion dst) {
        WorkRequest write(long wrId) {
            return WorkRequest.write(wrId, src.lkey(), src.address(), SLOT, dst.address(), dst.rkey());
        }
    }

    private OneSlot quickToGiveUp() {
        start(2, context -> context.nic().ackTimeoutNs(10_000_000L).retryCount(2));
        Connection c = connect(cluster.node(1), cluster.node(2));
        MemoryRegion src = c.local().register(c.local().space().allocate(SLOT), SLOT, RegistrationMode.PINNED, Access.all());
        MemoryRegion dst = c.remote().register(c.remote().space().allocate(SLOT), SLOT, RegistrationMode.PINNED, Access.all());
        return new OneSlot(c, src, dst);
    }

    @Test
    void workPostedWhileTheLinkIsCutEndsInRetryExceeded() throws Exception {
        OneSlot pair = quickToGiveUp();
        Connection c = pair.c();
        cluster.node(1).fabric().cut("node-2");
        c.qp().post(pair.write(1));
        Completion done = await(c.cq(), 30);
        assertThat(done.status()).isEqualTo(CompletionStatus.RETRY_EXCEEDED);
        assertThat(done.error()).contains("no lane to the node could take data");
        cluster.node(1).fabric().heal("node-2");
    }

    @Test
    void aLinkThatStaysCutEndsInRetryExceeded() throws Exception {
        OneSlot pair = quickToGiveUp();
        Connection c = pair.c();
        c.qp().post(pair.write(1));
        awaitSuccess(c.cq());
        // Delay every batch past the acknowledgement timeout so that this write is in flight, then cut.
        cluster.node(1).fabric().faults().delay(50_000_000L, 0);
        c.qp().post(pair.write(2));
        cluster.node(1).fabric().cut("node-2");
        Completion done = await(c.cq(), 30);
        assertThat(done.status()).isEqualTo(CompletionStatus.RETRY_EXCEEDED);
        assertThat(done.error()).contains("no acknowledgement from queue pair").contains("node-2");
        cluster.node(1).fabric().heal("node-2");
    }
}
