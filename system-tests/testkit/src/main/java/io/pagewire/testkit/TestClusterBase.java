package io.pagewire.testkit;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.node.security.SecurityConfiguration;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.tools.testbed.HeldResources;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.IntStream;

/**
 * What every backing shares: its nodes, the SDK connections handed out, closing (connections first,
 * then the nodes), the link check, the check that a test released everything it held, and the
 * description of every node a failing test prints.
 */
abstract class TestClusterBase<N extends ClusterNode> implements PagewireCluster {
    /** The nodes, node-1 first; a backing adds them as it starts them. */
    protected final List<N> nodes = new ArrayList<>();
    private HeldResources connections = new HeldResources();
    private final ClusterSpec spec;
    /** The cluster's CA and certificates, one per node and one for the test ("app"); null when it runs plaintext. */
    private final Path certificates;

    /** @param networked whether the nodes have ports to secure (not over the in-process transport) */
    TestClusterBase(ClusterSpec spec, boolean networked) {
        this.spec = spec;
        boolean plaintext = "plaintext".equalsIgnoreCase(spec.settings().getOrDefault(SecurityConfiguration.TRANSPORT.name(), "mtls").trim());
        certificates = plaintext || !networked ? null : TestbedCertificates.temporary(
                IntStream.rangeClosed(1, spec.size()).mapToObj(ClusterSpec::nodeId).toList(), EmbeddedCluster.APPLICATION);
    }

    /** Where the CA and the nodes' certificates are, or null when the cluster runs plaintext. */
    Path certificates() {
        return certificates;
    }

    @Override
    public ClientSecurity clientSecurity() {
        return certificates == null ? ClientSecurity.plaintext() : ClientSecurity.mutualTls(certificates, EmbeddedCluster.APPLICATION);
    }

    /** Default options that reach this cluster's nodes (its {@link #clientSecurity()}). */
    ConnectOptions probeOptions() {
        return ConnectOptions.defaults().withSecurity(clientSecurity()).withSharedMemory(false);
    }

    @Override
    public ClusterSpec spec() {
        return spec;
    }

    @Override
    public List<ClusterNode> nodes() {
        return List.copyOf(nodes);
    }

    /** Opens a connection that the cluster closes after the test. */
    Pagewire track(ClusterNode node, ConnectOptions options) {
        Pagewire connection = open(node, options.withSecurity(clientSecurity()));
        synchronized (this) {
            return connections.add(connection);
        }
    }

    /** A connection to a node, secured as {@code options} say; the caller closes it. */
    Pagewire open(ClusterNode node, ConnectOptions options) {
        return Pagewire.connect(node.target(), options);
    }

    @Override
    public void closeConnections() {
        HeldResources open;
        synchronized (this) {
            open = connections;
            connections = new HeldResources();
        }
        open.close();
    }

    /** Stops every node (and whatever else the backing started for them). */
    protected abstract void stopNodes();

    @Override
    public final void close() {
        try {
            closeConnections();
        } finally {
            try {
                stopNodes();
            } finally {
                TestbedCertificates.deleteDirectory(certificates);
            }
        }
    }

    @Override
    public void awaitReleased(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        for (ClusterNode node : nodes()) {
            if (!node.running()) {
                continue;
            }
            try (Pagewire probe = open(node, probeOptions())) {
                while (true) {
                    Map<String, Map<String, Double>> stats = probe.stats();
                    double sessions = value(stats, "pagewire_sessions", "");
                    double resident = value(stats, "pagewire_memory_pages", "state=resident");
                    double pinned = value(stats, "pagewire_memory_pages", "state=pinned");
                    if (sessions == 0 && resident == 0 && pinned == 0) {
                        break;
                    }
                    if (System.nanoTime() > deadline) {
                        throw new AssertionError(String.format("%s did not release everything within %s: %.0f sessions open, %.0f pages"
                                + " resident, %.0f pinned%n%s", node.id(), timeout, sessions, resident, pinned, describe()));
                    }
                    sleep(20);
                }
            }
        }
    }

    private static double value(Map<String, Map<String, Double>> stats, String name, String tags) {
        Map<String, Double> meter = stats.get(name);
        if (meter == null) {
            throw new AssertionError("the node does not export " + name);
        }
        return meter.getOrDefault(tags, 0.0);
    }

    @Override
    public String describe() {
        StringBuilder out = new StringBuilder("Pagewire test cluster: ").append(spec).append('\n');
        for (ClusterNode node : nodes()) {
            out.append("== ").append(node.id()).append(node.running() ? " (" + node.target() + ")" : " (not running)").append('\n');
            if (node.running()) {
                try (Pagewire probe = open(node, probeOptions().withDeadline(Duration.ofSeconds(5)))) {
                    out.append(probe.statList().stream().filter(s -> s.value() != 0)
                            .map(s -> String.format(" %s%s %s", s.name(), s.tags().isEmpty() ? "" : s.tags(), format(s.value())))
                            .collect(Collectors.joining("\n"))).append('\n');
                } catch (RuntimeException e) {
                    out.append(" counters unavailable: ").append(e.getMessage()).append('\n');
                }
            }
            String logs = node.logs();
            if (!logs.isEmpty()) {
                out.append(" log:\n").append(logs.indent(2));
            }
        }
        return out.toString();
    }

    private static String format(double value) {
        return value == Math.rint(value) ? String.format("%.0f", value) : String.format("%.3g", value);
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    /** Waits until every running node has a lane up to every other running node (a node still starting is asked again). */
    void awaitLinks(Duration timeout) {
        long deadline = System.nanoTime() + timeout.toNanos();
        for (ClusterNode node : nodes()) {
            if (!node.running()) {
                continue;
            }
            List<String> peers = nodes().stream().filter(p -> p != node && p.running()).map(ClusterNode::id).toList();
            List<String> down = peers;
            while (!down.isEmpty()) {
                try (Pagewire probe = open(node, probeOptions())) {
                    Map<String, Double> lanes = probe.stats().getOrDefault("pagewire_link_lanes_up", Map.of());
                    down = peers.stream().filter(p -> lanes.getOrDefault("peer=" + p, 0.0) < 1).toList();
                } catch (RuntimeException e) {
                    if (System.nanoTime() > deadline) {
                        throw e;
                    }
                }
                if (!down.isEmpty()) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException(node.id() + " has no link to " + down + " after " + timeout + "\n" + describe());
                    }
                    sleep(50);
                }
            }
        }
    }
}
