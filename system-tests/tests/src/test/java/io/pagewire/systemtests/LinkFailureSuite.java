package io.pagewire.systemtests;

import static io.pagewire.node.TestData.crc;
import static io.pagewire.node.TestData.pattern;
import static io.pagewire.systemtests.ClusterChecks.total;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.WorkRequest;
import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The node-level link failure suite through the testkit's {@code cutLink}: on the embedded backend
 * the fabric's lanes are torn down, on containers iptables drops every packet between the two
 * containers' addresses. Writes in flight across a short cut complete, in order and intact, once it
 * heals; a link that stays cut ends the queue pair's work in RETRY_EXCEEDED, and healing it
 * brings the link back for new work.
 */
abstract class LinkFailureSuite {
    private static final int SLOT = 4096;
    private static final int WRITES = 400;
    private static final int BEFORE_CUT = 100;

    /**
     * 20 ms acknowledgement timeouts backing off to 80 ms, 40 retransmissions: a budget of about 3 s
     * that a 300 ms cut fits in and a lasting cut exhausts.
     */
    static ClusterSpec spec() {
        return ClusterSpec.nodes(2).set("pagewire.nic.ackTimeoutNs", "20ms").set("pagewire.nic.retryCount", "40")
                .set("pagewire.nic.sendWindowPackets", "16").set("pagewire.nic.readRequestPackets", "8");
    }

    @Test
    void writesInFlightWhenTheLinkIsCutCompleteAfterItHeals(PagewireCluster cluster) throws Exception {
        Pagewire node1 = cluster.node(1).connect();
        Endpoint local = node1.openEndpoint("cut-writer");
        Endpoint remote = cluster.node(2).connect().openEndpoint("cut-target");
        long length = (long) WRITES * SLOT;
        long src = local.allocate(length);
        long dst = remote.allocate(length);
        byte[] data = pattern(9, (int) length);
        local.store(src, data);
        MemoryRegion srcRegion = local.register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = remote.register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
        QueuePair qp = local.connect(remote);
        double retransmittedBefore = total(node1, "pagewire_retransmitted_packets_total");

        List<CompletableFuture<Completion>> done = new ArrayList<>();
        done.addAll(qp.post(writes(srcRegion, src, dst, dstRegion.rkey(), 0, BEFORE_CUT)));
        qp.await(done.get(19));
        cluster.node(1).cutLink("node-2");
        done.addAll(qp.post(writes(srcRegion, src, dst, dstRegion.rkey(), BEFORE_CUT, WRITES)));
        Thread.sleep(300);
        long cut = System.nanoTime();
        cluster.node(1).healLink("node-2");
        long healed = System.nanoTime();

        for (int i = 0; i < WRITES; i++) {
            assertThat(qp.await(done.get(i)).bytes()).as("write %d", i).isEqualTo(SLOT);
        }
        System.out.printf("LinkFailureSuite: healing took %.0f ms; every write completed %.0f ms after the heal; node-1 resent %s%n",
                (healed - cut) / 1e6, (System.nanoTime() - healed) / 1e6, ClusterChecks.byCause(node1, "pagewire_retransmitted_packets_total"));
        assertThat(crc(remote.load(dst, (int) length))).as("every slot landed once, intact").isEqualTo(crc(data));
        assertThat(total(node1, "pagewire_retransmitted_packets_total") - retransmittedBefore)
                .as("what the cut lost was sent again").isPositive();
        if (cutClosesLanes(cluster)) {
            assertThat(total(node1, "pagewire_link_lanes_lost_total", "peer=node-2")).as("the cut broke the lanes").isPositive();
        }
        assertThat(total(node1, "pagewire_link_lanes_up", "peer=node-2")).as("lanes came back after the heal").isPositive();
        qp.close();
        local.close();
        remote.close();
    }

    @Test
    void aLinkThatStaysCutEndsInRetryExceededAndNewWorkFlowsOnceItHeals(PagewireCluster cluster) {
        Endpoint local = cluster.node(1).connect().openEndpoint("cut-for-good");
        Endpoint remote = cluster.node(2).connect().openEndpoint("cut-for-good");
        long src = local.allocate(SLOT);
        long dst = remote.allocate(SLOT);
        MemoryRegion srcRegion = local.register(src, SLOT, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = remote.register(dst, SLOT, RegistrationMode.PINNED, Access.all());
        QueuePair qp = local.connect(remote);
        qp.await(qp.write(srcRegion, src, SLOT, dst, dstRegion.rkey()));

        cluster.node(1).cutLink("node-2");
        long start = System.nanoTime();
        try {
            assertThatThrownBy(() -> qp.await(qp.write(srcRegion, src, SLOT, dst, dstRegion.rkey())))
                    .isInstanceOf(PagewireException.RetryExceededException.class)
                    .hasMessageContaining("node-2").hasMessageContaining("40 retransmissions");
            System.out.printf("a write over the cut link failed after %.2f s%n", (System.nanoTime() - start) / 1e9);
        } finally {
            cluster.node(1).healLink("node-2");
        }

        // The failed queue pair is in the error state, as in ibverbs; a new one carries work again once
        // the network does. Over TCP that can take seconds after a long cut: the connections' own
        // retransmission timers backed off while every segment was dropped.
        byte[] data = pattern(4, SLOT);
        local.store(src, data);
        long healed = System.nanoTime();
        int attempts = 0;
        while (true) {
            attempts++;
            QueuePair fresh = local.connect(remote);
            try {
                fresh.await(fresh.write(srcRegion, src, SLOT, dst, dstRegion.rkey()));
                break;
            } catch (PagewireException.RetryExceededException e) {
                assertThat(System.nanoTime() - healed).as("the healed link carries work within 30 s (%s)", e.getMessage())
                        .isLessThan(TimeUnit.SECONDS.toNanos(30));
            } finally {
                fresh.close();
            }
        }
        System.out.printf("a new queue pair's write landed %.2f s after the heal (attempt %d)%n", (System.nanoTime() - healed) / 1e9, attempts);
        assertThat(remote.load(dst, SLOT)).isEqualTo(data);
        local.close();
        remote.close();
    }

    @Test
    void workPostedWhileTheLinkIsCutEndsInRetryExceededNamingTheLink(PagewireCluster cluster) {
        Endpoint local = cluster.node(1).connect().openEndpoint("posted-while-cut");
        Endpoint remote = cluster.node(2).connect().openEndpoint("posted-while-cut");
        long src = local.allocate(SLOT);
        long dst = remote.allocate(SLOT);
        MemoryRegion srcRegion = local.register(src, SLOT, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = remote.register(dst, SLOT, RegistrationMode.PINNED, Access.all());
        QueuePair qp = local.connect(remote);
        cluster.node(1).cutLink("node-2");
        try {
            // Nothing ever went out (embedded: no lane takes data) or nothing came back (containers: the
            // lanes are up, their packets dropped); either way the acknowledgement timer runs out.
            assertThatThrownBy(() -> qp.await(qp.write(srcRegion, src, SLOT, dst, dstRegion.rkey())))
                    .isInstanceOf(PagewireException.RetryExceededException.class)
                    .hasMessageContaining(cutClosesLanes(cluster) ? "no lane to the node could take data" : "no acknowledgement from queue pair");
        } finally {
            cluster.node(1).healLink("node-2");
        }
        local.close();
        remote.close();
    }

    /**
     * Whether a cut closes the fabric's lanes (embedded nodes: {@code Fabric.cut}) rather than drop
     * their packets while the TCP connections stay up (containers: iptables).
     */
    private static boolean cutClosesLanes(PagewireCluster cluster) {
        return cluster.spec().backend() != ClusterBackend.CONTAINERS;
    }

    private static List<WorkRequest> writes(MemoryRegion srcRegion, long src, long dst, long rkey, int from, int to) {
        List<WorkRequest> list = new ArrayList<>();
        for (int i = from; i < to; i++) {
            list.add(WorkRequest.write(srcRegion, src + (long) i * SLOT, SLOT, dst + (long) i * SLOT, rkey));
        }
        return list;
    }
}
