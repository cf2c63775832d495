package io.pagewire.systemtests.verbs;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.kernel.MemoryStats;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.node.NodeContext;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.AfterEach;
import io.pagewire.systemtests.PrintClusterOnFailure;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A cluster on real loopback gRPC and SDK connections to its nodes, the way applications see it.
 * Failing tests print the nodes' counters; after each test every node must hold no pin and no frame.
 */
abstract class SdkFixture {
    protected EmbeddedCluster cluster;
    private final List<Pagewire> connections = new ArrayList<>();

    @RegisterExtension
    final PrintClusterOnFailure printCountersOnFailure = new PrintClusterOnFailure(() -> cluster);

    protected EmbeddedCluster start(int nodes, Consumer<NodeContext> configure) {
        cluster = EmbeddedCluster.start(nodes, Transport.NETTY, context -> {
            context.kernel().physicalMemoryBytes(32L << 20).swapBytes(64L << 20);
            context.nic().ackTimeoutNs(50_000_000L);
            configure.accept(context);
        });
        return cluster;
    }

    /**
     * How the suite's applications reach their nodes: by default over shared-memory rings (they are
     * on the node's host); a subclass binds the same suite to the gRPC stream alone, as a remote
     * application would use it.
     */
    protected ConnectOptions connectOptions() {
        return cluster.connectOptions();
    }

    protected Pagewire connect(PagewireNode node) {
        return track(Pagewire.connect(node.target(), connectOptions()));
    }

    /** A connection the fixture closes after the test, before it checks that the nodes hold nothing. */
    protected Pagewire track(Pagewire connection) {
        connections.add(connection);
        return connection;
    }

    @AfterEach
    void closeEverything() throws InterruptedException {
        for (Pagewire connection : connections) {
            connection.close();
        }
        connections.clear();
        if (cluster == null) {
            return;
        }
        try {
            for (PagewireNode node : cluster.nodes()) {
                awaitTrue(() -> node.sessions() == 0 && node.kernel().stats().residentPages() == 0, 10_000,
                        node.id() + " released every session's memory");
                MemoryStats stats = node.kernel().stats();
                assertThat(stats.pinnedPages()).as(node.id() + " pinned pages").isZero();
                assertThat(stats.residentPages()).as(node.id() + " frames in use").isZero();
                assertThat(node.nic().workRequestsOutstanding()).as(node.id() + " work requests counted as outstanding").isZero();
            }
        } finally {
            cluster.close();
            cluster = null;
        }
    }
}
