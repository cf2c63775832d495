package io.pagewire.testkit;

import io.pagewire.node.NodeConfiguration;
import io.pagewire.node.NodeSettings;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;

/**
 * What cluster a test wants: how many nodes, their settings (the names {@code pagewire node
 * --list-settings} prints, applied to every node), where they run and, for containers, the image.
 * Build one with {@link #nodes(int)}: {@code ClusterSpec.nodes(3).set("pagewire.nic.tlbEntries", "64")}.
 */
public final class ClusterSpec {
    /** The system property naming the node image for the container backend. */
    public static final String IMAGE_PROPERTY = "pagewire.testkit.image";
    /** The image the container backend runs when nothing else is said: what {@code deploy/testbed.sh} builds. */
    public static final String DEFAULT_IMAGE = "pagewire/node:latest";

    /** Settings the cluster itself gives each node; a spec may not set them. */
    private static final Set<String> OWNED_BY_THE_CLUSTER = Set.of(NodeConfiguration.ID.name(), NodeConfiguration.PEERS.name(),
            NodeConfiguration.HOST.name(), NodeConfiguration.PORT.name(), NodeConfiguration.METRICS_PORT.name());

    private final int nodes;
    private final Map<String, String> settings = new LinkedHashMap<>();
    private ClusterBackend backend;
    private String image;
    private Duration startTimeout = Duration.ofMinutes(2);

    private ClusterSpec(int nodes) {
        if (nodes < 1 || nodes > 16) {
            throw new IllegalArgumentException("a test cluster has 1 to 16 nodes, not " + nodes);
        }
        this.nodes = nodes;
        // Small nodes by default: a test wants many of them on a 2-core machine.
        settings.put("pagewire.kernel.physicalMemoryBytes", "32MiB");
        settings.put("pagewire.kernel.swapBytes", "64MiB");
    }

    /** A cluster of {@code count} nodes (node-1..node-N), small (32 MiB of memory, 64 MiB of swap) unless set otherwise. */
    public static ClusterSpec nodes(int count) {
        return new ClusterSpec(count);
    }

    /** Sets a node setting on every node, by its property name (e.g. "pagewire.nic.mtuBytes", "1024"). */
    public ClusterSpec set(String name, String value) {
        if (OWNED_BY_THE_CLUSTER.contains(name)) {
            throw new IllegalArgumentException(name + " is given to each node by the test cluster; it cannot be set");
        }
        if (!NodeSettings.names().contains(name)) {
            throw new IllegalArgumentException("no node setting is called '" + name + "' (see pagewire node --list-settings)");
        }
        settings.put(name, value);
        return this;
    }

    /** Runs the nodes on this backend (default: {@link ClusterBackend#configured()}). */
    public ClusterSpec backend(ClusterBackend value) {
        backend = value;
        return this;
    }

    /** The node image of the container backend (default: the {@value #IMAGE_PROPERTY} property, else {@value #DEFAULT_IMAGE}). */
    public ClusterSpec image(String value) {
        image = value;
        return this;
    }

    /** How long starting the cluster may take before it fails (default 2 minutes). */
    public ClusterSpec startTimeout(Duration value) {
        startTimeout = value;
        return this;
    }

    /** A spec like this one with more settings ("name=value" pairs), checked as {@link #set} checks them. */
    public ClusterSpec with(String... nameValuePairs) {
        ClusterSpec copy = new ClusterSpec(nodes);
        copy.settings.clear();
        copy.settings.putAll(settings);
        copy.backend = backend;
        copy.image = image;
        copy.startTimeout = startTimeout;
        for (String pair : nameValuePairs) {
            int eq = pair.indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("a setting is written name=value, not '" + pair + "'");
            }
            copy.set(pair.substring(0, eq).strip(), pair.substring(eq + 1).strip());
        }
        return copy;
    }

    public int size() {
        return nodes;
    }

    public Map<String, String> settings() {
        return Collections.unmodifiableMap(settings);
    }

    public ClusterBackend backend() {
        return backend != null ? backend : ClusterBackend.configured();
    }

    public String image() {
        return image != null ? image : System.getProperty(IMAGE_PROPERTY, DEFAULT_IMAGE);
    }

    public Duration startTimeout() {
        return startTimeout;
    }

    /** The id of node i (1-based). */
    static String nodeId(int i) {
        return "node-" + i;
    }

    @Override
    public String toString() {
        return nodes + " nodes on " + backend() + (backend() == ClusterBackend.CONTAINERS ? " (" + image() + ")" : "") + ", " + settings;
    }
}
