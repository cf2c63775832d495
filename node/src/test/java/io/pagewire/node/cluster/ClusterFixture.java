package io.pagewire.node.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.MemoryStats;
import io.pagewire.node.EmbeddedCluster;
import io.pagewire.node.NodeContext;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.QueuePair;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import io.pagewire.node.PrintClusterOnFailure;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * What every cluster suite shares: a cluster per test on the suite's transport, helpers to connect
 * endpoints and wait for completions, the nodes' counters printed when a test fails, and the check
 * that after the test every pin and frame is released.
 */
abstract class ClusterFixture {
    protected EmbeddedCluster cluster;

    /** The transport the concrete suite runs on. */
    protected abstract Transport transport();

    @RegisterExtension
    final PrintClusterOnFailure printCountersOnFailure = new PrintClusterOnFailure(() -> cluster);

    /** Starts a cluster; small nodes unless {@code configure} says otherwise. */
    protected EmbeddedCluster start(int nodes, Consumer<NodeContext> configure) {
        cluster = EmbeddedCluster.start(nodes, transport(), context -> {
            context.kernel().physicalMemoryBytes(32L << 20).swapBytes(128L << 20).systemBufferBytes(1L << 20);
            context.nic().ackTimeoutNs(50_000_000L);
            configure.accept(context);
        });
        return cluster;
    }

    @AfterEach
    void releaseEverything() {
        if (cluster == null) {
            return;
        }
        try {
            for (PagewireNode node : cluster.nodes()) {
                for (Endpoint endpoint : node.nic().endpoints()) {
                    endpoint.close();
                }
            }
            for (PagewireNode node : cluster.nodes()) {
                MemoryStats stats = node.kernel().stats();
                assertThat(stats.pinnedPages()).as(node.id() + " pinned pages after the test").isZero();
                assertThat(stats.residentPages()).as(node.id() + " frames in use after the test").isZero();
                assertThat(node.nic().tlbPinnedEntries()).as(node.id() + " pinned TLB entries").isZero();
            }
        } finally {
            cluster.close();
            cluster = null;
        }
    }

    /** Two endpoints on two nodes with a queue pair between them, connected both ways. */
    protected static Connection connect(PagewireNode from, PagewireNode to) {
        Endpoint local = from.nic().openEndpoint("test-" + from.id());
        Endpoint remote = to.nic().openEndpoint("test-" + to.id());
        return connect(local, remote);
    }

    protected static Connection connect(Endpoint local, Endpoint remote) {
        CompletionQueue cq = local.nic().createCompletionQueue();
        CompletionQueue remoteCq = remote.nic().createCompletionQueue();
        QueuePair qp = local.nic().createQueuePair(local, cq);
        QueuePair remoteQp = remote.nic().createQueuePair(remote, remoteCq);
        qp.connect(remoteQp.address());
        remoteQp.connect(qp.address());
        return new Connection(local, remote, qp, remoteQp, cq, remoteCq);
    }

    /** The next completion, failing the test (with the cluster's state) if none comes in time. */
    protected Completion await(CompletionQueue cq, long timeoutSeconds) throws InterruptedException {
        Completion c = cq.take(timeoutSeconds, TimeUnit.SECONDS);
        assertThat(c).as("a completion within " + timeoutSeconds + " s").isNotNull();
        return c;
    }

    /** Waits for a completion and requires success, showing the error otherwise. */
    protected Completion awaitSuccess(CompletionQueue cq) throws InterruptedException {
        Completion c = await(cq, 60);
        assertThat(c.ok()).as("completion %s: %s", c, c.error()).isTrue();
        return c;
    }

    /** Two endpoints joined by a queue pair; {@code cq} is the local side's completion queue, {@code remoteCq} the other's. */
    protected record Connection(Endpoint local, Endpoint remote, QueuePair qp, QueuePair remoteQp, CompletionQueue cq,
            CompletionQueue remoteCq) {
    }
}
