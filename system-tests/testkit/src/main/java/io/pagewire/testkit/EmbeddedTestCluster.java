package io.pagewire.testkit;

import io.grpc.ManagedChannel;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.NodeInfo;
import io.pagewire.client.Pagewire;
import io.pagewire.client.RegionStats;
import io.pagewire.node.NodeContext;
import io.pagewire.node.NodeSettings;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;

/**
 * The embedded backings: every node in the test's JVM, over real HTTP/2 on loopback as between
 * containers ({@link ClusterBackend#EMBEDDED}), or over gRPC's in-process transport
 * ({@link ClusterBackend#IN_PROCESS}), where applications reach a node by its id.
 */
final class EmbeddedTestCluster extends TestClusterBase<EmbeddedTestCluster.EmbeddedNode> {
    private final Transport transport;

    private EmbeddedTestCluster(ClusterSpec spec, Transport transport) {
        super(spec, transport == Transport.NETTY);
        this.transport = transport;
    }

    static EmbeddedTestCluster start(ClusterSpec spec, Transport transport) {
        EmbeddedTestCluster cluster = new EmbeddedTestCluster(spec, transport);
        try {
            for (int i = 1; i <= spec.size(); i++) {
                EmbeddedNode node = new EmbeddedNode(cluster, ClusterSpec.nodeId(i));
                cluster.nodes.add(node);
                node.launch(0);
            }
            for (EmbeddedNode node : cluster.nodes) {
                for (EmbeddedNode peer : cluster.nodes) {
                    if (peer != node) {
                        node.node.connect(peer.id, peer.node.target());
                    }
                }
            }
            cluster.awaitLinks(spec.startTimeout());
            return cluster;
        } catch (RuntimeException e) {
            cluster.close();
            throw e;
        }
    }

    /** In-process nodes are reached by their server's name, over a channel the connection's owner closes with it. */
    @Override
    Pagewire open(ClusterNode node, ConnectOptions options) {
        if (transport == Transport.NETTY) {
            return super.open(node, options);
        }
        ManagedChannel channel = InProcessChannelBuilder.forName(node.id()).maxInboundMessageSize(64 << 20).build();
        Pagewire connection = Pagewire.connect(channel, options);
        return new ChannelOwningConnection(connection, channel);
    }

    @Override
    public io.grpc.ManagedChannel openChannel(ClusterNode node) {
        return transport == Transport.NETTY ? super.openChannel(node) : InProcessChannelBuilder.forName(node.id()).build();
    }

    @Override
    protected void stopNodes() {
        for (EmbeddedNode node : nodes) {
            if (node.node != null) {
                node.node.fabric().expectPeersToLeave();
            }
        }
        for (EmbeddedNode node : nodes) {
            node.halt();
        }
    }

    /** A node of the embedded cluster; its port (or in-process name) stays the same across restarts, so peers find it again. */
    static final class EmbeddedNode implements ClusterNode {
        private final EmbeddedTestCluster cluster;
        private final String id;
        private volatile PagewireNode node;
        private int port;

        EmbeddedNode(EmbeddedTestCluster cluster, String id) {
            this.cluster = cluster;
            this.id = id;
        }

        void launch(int portToBind) {
            NodeContext context = new NodeContext().nodeId(id).transport(cluster.transport).host("127.0.0.1").port(portToBind).metricsPort(0);
            for (int i = 1; i <= cluster.spec().size(); i++) {
                context.acceptPeer(ClusterSpec.nodeId(i));
            }
            if (cluster.certificates() != null) {
                context.security().certificateDirectory(cluster.certificates());
            }
            NodeSettings.apply(context, cluster.spec().settings(), "the test cluster's spec");
            for (EmbeddedNode peer : cluster.nodes) {
                if (peer != this && (peer.port != 0 || cluster.transport == Transport.IN_PROCESS) && peer.node != null) {
                    context.peer(peer.id, peer.target());
                }
            }
            node = PagewireNode.start(context);
            if (cluster.transport == Transport.NETTY) {
                port = Integer.parseInt(node.target().substring(node.target().lastIndexOf(':') + 1));
            }
        }

        void halt() {
            PagewireNode current = node;
            node = null;
            if (current != null) {
                current.close();
            }
        }

        private PagewireNode live() {
            PagewireNode current = node;
            if (current == null) {
                throw new IllegalStateException(id + " is not running");
            }
            return current;
        }

        @Override
        public String id() {
            return id;
        }

        /** "127.0.0.1:port", or the in-process server's name (the node's id). */
        @Override
        public String target() {
            return cluster.transport == Transport.NETTY ? "127.0.0.1:" + port : id;
        }

        @Override
        public String metricsUrl() {
            return live().metricsUrl();
        }

        @Override
        public Pagewire connect(ConnectOptions options) {
            live();
            return cluster.track(this, options);
        }

        @Override
        public boolean running() {
            return node != null;
        }

        @Override
        public void stop() {
            PagewireNode current = live();
            node = null;
            current.shutdownGracefully();
        }

        @Override
        public void kill() {
            halt();
        }

        @Override
        public void restart() {
            if (node != null) {
                throw new IllegalStateException(id + " is running; stop or kill it first");
            }
            launch(port);
            for (EmbeddedNode peer : cluster.nodes) {
                if (peer != this && peer.node != null) {
                    node.connect(peer.id, peer.target());
                }
            }
            cluster.awaitLinks(cluster.spec().startTimeout());
        }

        @Override
        public void cutLink(String peer) {
            live().fabric().cut(peer);
            ((EmbeddedNode) cluster.node(peer)).live().fabric().cut(id);
        }

        @Override
        public void healLink(String peer) {
            live().fabric().heal(peer);
            ((EmbeddedNode) cluster.node(peer)).live().fabric().heal(id);
        }

        @Override
        public String logs() {
            return "";
        }

        /** The node itself, for tests of the node's internals (embedded backings only). */
        PagewireNode node() {
            return live();
        }
    }

    /** A connection that closes the in-process channel it was made on when it closes. */
    private record ChannelOwningConnection(Pagewire connection, ManagedChannel channel) implements Pagewire {
        @Override
        public NodeInfo node() {
            return connection.node();
        }

        @Override
        public Endpoint openEndpoint(String name) {
            return connection.openEndpoint(name);
        }

        @Override
        public CompletableFuture<Endpoint> openEndpointAsync(String name) {
            return connection.openEndpointAsync(name);
        }

        @Override
        public Map<String, Map<String, Double>> stats() {
            return connection.stats();
        }

        @Override
        public List<Stat> statList() {
            return connection.statList();
        }

        @Override
        public List<RegionStats> regionStats() {
            return connection.regionStats();
        }

        @Override
        public void close() {
            try {
                connection.close();
            } finally {
                channel.shutdownNow();
            }
        }
    }
}
