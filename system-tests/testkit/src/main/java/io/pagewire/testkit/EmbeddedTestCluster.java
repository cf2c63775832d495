package io.pagewire.testkit;

import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.node.NodeContext;
import io.pagewire.node.NodeSettings;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;

/** The embedded backing: every node in the test's JVM on loopback, over real HTTP/2 as between containers. */
final class EmbeddedTestCluster extends TestClusterBase<EmbeddedTestCluster.EmbeddedNode> {
    private EmbeddedTestCluster(ClusterSpec spec) {
        super(spec);
    }

    static EmbeddedTestCluster start(ClusterSpec spec) {
        EmbeddedTestCluster cluster = new EmbeddedTestCluster(spec);
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

    /** A node of the embedded cluster; its port stays the same across restarts, so peers find it again. */
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
            NodeContext context = new NodeContext().nodeId(id).transport(Transport.NETTY).host("127.0.0.1").port(portToBind).metricsPort(0);
            for (int i = 1; i <= cluster.spec().size(); i++) {
                context.acceptPeer(ClusterSpec.nodeId(i));
            }
            if (cluster.certificates() != null) {
                context.security().certificateDirectory(cluster.certificates());
            }
            NodeSettings.apply(context, cluster.spec().settings(), "the test cluster's spec");
            for (EmbeddedNode peer : cluster.nodes) {
                if (peer != this && peer.port != 0) {
                    context.peer(peer.id, "127.0.0.1:" + peer.port);
                }
            }
            node = PagewireNode.start(context);
            port = Integer.parseInt(node.target().substring(node.target().lastIndexOf(':') + 1));
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

        @Override
        public String target() {
            return "127.0.0.1:" + port;
        }

        @Override
        public String metricsUrl() {
            return live().metricsUrl();
        }

        @Override
        public Pagewire connect(ConnectOptions options) {
            return cluster.track(live().target(), options);
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
    }
}
