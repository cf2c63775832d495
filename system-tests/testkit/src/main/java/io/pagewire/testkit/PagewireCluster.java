package io.pagewire.testkit;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.impl.GrpcPagewire;
import io.pagewire.node.Transport;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * A running Pagewire cluster for a test: N nodes, each linked to every other, whatever backs them
 * ({@link ClusterBackend}). Start one with {@link #start(ClusterSpec)} or, in JUnit 5, with
 * {@link PagewireClusterExtension}.
 */
public interface PagewireCluster extends AutoCloseable {
    /** Starts a cluster as the spec says and returns once every node is healthy and linked to every other. */
    static PagewireCluster start(ClusterSpec spec) {
        return switch (spec.backend()) {
            case IN_PROCESS -> EmbeddedTestCluster.start(spec, Transport.IN_PROCESS);
            case EMBEDDED -> EmbeddedTestCluster.start(spec, Transport.NETTY);
            case CONTAINERS -> ContainerTestCluster.start(spec);
        };
    }

    ClusterSpec spec();

    List<ClusterNode> nodes();

    /** Node i, counted from 1 as the ids are (node-1 is {@code node(1)}). */
    default ClusterNode node(int i) {
        return nodes().get(i - 1);
    }

    /** Node by id. */
    default ClusterNode node(String id) {
        return nodes().stream().filter(n -> n.id().equals(id)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no node " + id + " in this cluster"));
    }

    /**
     * The Docker network the nodes are on (peers are node-1:7100 there), for containers a test runs
     * beside them: a Prometheus, a workload. Empty for the embedded backend.
     */
    default Optional<org.testcontainers.containers.Network> network() {
        return Optional.empty();
    }

    /**
     * How an application proves itself to these nodes: mutual TLS with the certificate the cluster
     * issued to the test ("app"), or plaintext when the spec says so.
     */
    ClientSecurity clientSecurity();

    /** A raw gRPC channel to a node, secured like the SDK's connections (for tests that send what the SDK would not). */
    default io.grpc.ManagedChannel openChannel(ClusterNode node) {
        return GrpcPagewire.channelBuilder(node.target(), clientSecurity()).build();
    }

    /** Closes every SDK connection handed out so far (the extension calls it after each test). */
    void closeConnections();

    /**
     * Waits until no application session is open on any running node and none holds a frame or a pin:
     * what every test should leave behind. Fails with the nodes' figures if that does not happen in time.
     */
    void awaitReleased(Duration timeout);

    /** Every node's counters and, for containers, its last log lines: what a failing test prints. */
    String describe();

    /** Stops every node and frees what the cluster used (containers, network). */
    @Override
    void close();
}
