package io.pagewire.tools.testbed;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.impl.GrpcPagewire;
import io.pagewire.node.NodeContext;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.IntStream;

/**
 * Several nodes in one JVM, every one linked to every other, over in-process gRPC or real Netty on
 * loopback. The demo, the perf tool's embedded pair and the cluster tests run on it. Over Netty the
 * nodes run mutual TLS with a testbed CA made for the cluster (an application identity "app"
 * included, see {@link #clientSecurity()}), unless the configuration says plaintext.
 */
public final class EmbeddedCluster implements AutoCloseable {
    /** The application identity the cluster's certificates include for its clients. */
    public static final String APPLICATION = "app";

    private final List<PagewireNode> nodes = new ArrayList<>();
    private Path certificates;
    private Transport transport;
    private Consumer<NodeContext> configure;

    private EmbeddedCluster() {
    }

    /**
     * Starts {@code size} nodes named node-1..node-N and waits until all links are up.
     *
     * @param configure adjusts each node's context (memory, NIC, faults, security) before it starts
     */
    public static EmbeddedCluster start(int size, Transport transport, Consumer<NodeContext> configure) {
        EmbeddedCluster cluster = new EmbeddedCluster();
        cluster.transport = transport;
        cluster.configure = configure;
        try {
            if (transport == Transport.NETTY) {
                cluster.certificates = TestbedCertificates.temporary(
                        IntStream.rangeClosed(1, size).mapToObj(i -> "node-" + i).toList(), APPLICATION);
            }
            for (int i = 1; i <= size; i++) {
                cluster.nodes.add(PagewireNode.start(cluster.context(i, size, 0)));
            }
            for (PagewireNode node : cluster.nodes) {
                for (PagewireNode peer : cluster.nodes) {
                    if (peer != node) {
                        node.connect(peer.id(), peer.target());
                    }
                }
            }
            cluster.awaitLinks(TimeUnit.SECONDS.toNanos(30));
            return cluster;
        } catch (RuntimeException e) {
            cluster.close();
            throw e;
        }
    }

    private NodeContext context(int i, int size, int port) {
        NodeContext context = new NodeContext().nodeId("node-" + i).transport(transport).host("127.0.0.1").port(port).metricsPort(-1)
                .address("127.0.1." + i); // each node its own address on one host, for the connection manager
        for (int j = 1; j <= size; j++) {
            context.acceptPeer("node-" + j);
        }
        if (certificates != null) {
            context.security().certificateDirectory(certificates);
        }
        configure.accept(context);
        return context;
    }

    /**
     * Restarts node {@code i} as a crash would: the process ends (its memory, endpoints and queue pairs
     * with it) and a new one starts on the same port, with a new incarnation, and links up again. Over
     * the network only (an in-process node's name would be taken).
     */
    public synchronized PagewireNode restart(int i) {
        if (transport != Transport.NETTY) {
            throw new IllegalStateException("only a cluster over the network restarts its nodes");
        }
        PagewireNode old = nodes.get(i - 1);
        String target = old.target();
        int port = Integer.parseInt(target.substring(target.lastIndexOf(':') + 1));
        old.close();
        PagewireNode fresh = PagewireNode.start(context(i, nodes.size(), port));
        nodes.set(i - 1, fresh);
        for (PagewireNode peer : nodes) {
            if (peer != fresh) {
                fresh.connect(peer.id(), peer.target());
            }
        }
        awaitLinks(TimeUnit.SECONDS.toNanos(30));
        return fresh;
    }

    /** How an application reaches these nodes: mutual TLS as {@link #APPLICATION} when they run it, else plaintext. */
    public ClientSecurity clientSecurity() {
        return nodes.get(0).context().security().mutualTls() ? ClientSecurity.mutualTls(certificates, APPLICATION) : ClientSecurity.plaintext();
    }

    /** Default SDK options with this cluster's {@link #clientSecurity()}. */
    public ConnectOptions connectOptions() {
        return ConnectOptions.defaults().withSecurity(clientSecurity());
    }

    /** A raw gRPC channel to a node, secured like {@link #connectOptions()} (tests send what the SDK would not). */
    public io.grpc.ManagedChannel openChannel(PagewireNode node) {
        return GrpcPagewire.channelBuilder(node.target(), clientSecurity()).build();
    }

    /** Where the cluster's CA and certificates are (null over the in-process transport). */
    public Path certificates() {
        return certificates;
    }

    private void awaitLinks(long timeoutNs) {
        long deadline = System.nanoTime() + timeoutNs;
        for (PagewireNode node : nodes) {
            for (PagewireNode peer : nodes) {
                if (peer == node) {
                    continue;
                }
                while (!node.fabric().connectedPeers().contains(peer.id())) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException("node " + node.id() + " could not reach " + peer.id() + " at " + peer.target());
                    }
                    try {
                        Thread.sleep(5);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        throw new IllegalStateException("interrupted while waiting for links", e);
                    }
                }
            }
        }
    }

    public synchronized List<PagewireNode> nodes() {
        return List.copyOf(nodes);
    }

    /** Node i, counted from 1 as the names are (after a restart, its new process). */
    public synchronized PagewireNode node(int i) {
        return nodes.get(i - 1);
    }

    public int size() {
        return nodes.size();
    }

    /** Every node's NIC and kernel counters and memory figures: what a failing cluster test prints. */
    public String describe() {
        StringBuilder out = new StringBuilder();
        for (PagewireNode node : nodes) {
            out.append("== ").append(node.id()).append(" (").append(node.target()).append(")\n");
            out.append(" memory: ").append(node.kernel().stats()).append('\n');
            out.append(" nic:\n").append(node.nic().counters());
            out.append(" kernel:\n").append(node.kernel().counters());
            node.fabric().links().forEach((peer, link) -> out.append(String.format(
                    " link to %s: sent %d packets in %d batches, received %d, dropped %d while no lane was up, lanes opened %d, lost %d%n",
                    peer, link.packetsSent(), link.batchesSent(), link.packetsReceived(), link.unsentWhileDown(), link.lanesOpened(),
                    link.lanesLost())));
            node.nic().queuePairs().forEach(qp -> out.append(' ').append(qp.describe()).append('\n'));
        }
        return out.toString();
    }

    @Override
    public void close() {
        for (PagewireNode node : nodes) {
            node.fabric().expectPeersToLeave();
        }
        for (PagewireNode node : nodes) {
            node.close();
        }
        TestbedCertificates.deleteDirectory(certificates);
    }
}
