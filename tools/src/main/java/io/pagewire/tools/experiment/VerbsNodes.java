package io.pagewire.tools.experiment;

import io.pagewire.node.NodeContext;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.tools.perf.VerbsPerftest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.ToDoubleFunction;

/**
 * The two nodes an experiment runs stock verbs programs (perftest, rdma-core's pingpongs) between,
 * through the verbs library: the requester's program on the first, the responder's on the second.
 * Either nodes started in this JVM, whose settings the experiment may change while they run, or two
 * nodes of a running cluster, whose settings are what they were started with; a program reaches its
 * node through the node's verbs socket, so it runs beside the node: on this host, or in the node's
 * container. Both are read through the
 * SDK's meters ({@link NodeStats}), so one measurement serves both. The library and the programs
 * must be installed (the build's verbs-c module and its packages); without them an experiment says
 * so instead of running.
 */
final class VerbsNodes implements AutoCloseable {
    private final ApplicationPair nodes;
    private final VerbsPerftest programs;
    private final VerbsPerftest.Place requesterPlace;
    private final VerbsPerftest.Place responderPlace;

    private VerbsNodes(ApplicationPair nodes, VerbsPerftest.Place requesterPlace, VerbsPerftest.Place responderPlace) {
        this.nodes = nodes;
        this.programs = VerbsPerftest.find();
        this.requesterPlace = requesterPlace;
        this.responderPlace = responderPlace;
    }

    /**
     * Starts the two nodes, each configured by {@code configure} after the experiments' defaults (256 MiB
     * of memory and of swap, plaintext).
     *
     * @throws IllegalStateException naming what is missing when the library or {@code programs} are not installed
     */
    static VerbsNodes start(Consumer<NodeContext> configure, String... programs) {
        requirePrograms(programs);
        EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.security().plaintext();
            c.kernel().physicalMemoryBytes(256L << 20).swapBytes(256L << 20);
            configure.accept(c);
        });
        return new VerbsNodes(ApplicationPair.over(cluster), VerbsPerftest.Place.host(cluster.node(1).target()),
                VerbsPerftest.Place.host(cluster.node(2).target()));
    }

    /**
     * Connects to the two nodes of a running cluster: its programs run on this host, beside the nodes,
     * or in the nodes' containers when the settings name them (the image has the library and programs).
     *
     * @throws IllegalStateException naming what is missing when the programs run here and the library or {@code programs} are not installed
     */
    static VerbsNodes attach(ExperimentSettings settings, String... programs) {
        ExperimentSettings.RunningCluster cluster = settings.cluster();
        if (cluster.containers().isEmpty()) {
            requirePrograms(programs);
            return new VerbsNodes(ApplicationPair.open(settings), VerbsPerftest.Place.host(cluster.requester()),
                    VerbsPerftest.Place.host(cluster.responder()));
        }
        return new VerbsNodes(ApplicationPair.open(settings), VerbsPerftest.Place.inContainer(cluster.containers().get(0)),
                VerbsPerftest.Place.inContainer(cluster.containers().get(1)));
    }

    /** Starts two nodes configured by {@code configure}, or connects to the settings' running cluster (configured as it was started). */
    static VerbsNodes open(ExperimentSettings settings, Consumer<NodeContext> configure, String... programs) {
        return settings.cluster() == null ? start(configure, programs) : attach(settings, programs);
    }

    /**
     * Checks that the library and {@code programs} are installed.
     *
     * @throws IllegalStateException naming what is missing
     */
    static void requirePrograms(String... programs) {
        if (VerbsPerftest.library() == null) {
            throw new IllegalStateException("this experiment runs verbs programs through the verbs library, which is not built here"
                    + " (mvn -B verify builds it into verbs-c/target, or set PAGEWIRE_VERBS_LIBRARY)");
        }
        for (String program : programs) {
            if (io.pagewire.tools.perf.ExternalPrograms.onPath(program) == null) {
                throw new IllegalStateException("this experiment runs " + program + ", which is not on the PATH (Debian's perftest and"
                        + " ibverbs-utils packages; verbs-c/ensure-packages.sh installs them)");
            }
        }
    }

    /** Whether the nodes run in this JVM, their settings the experiment's to change. */
    boolean embedded() {
        return nodes.embedded().isPresent();
    }

    /** The requester's node in this JVM: only for nodes this experiment started. */
    PagewireNode requester() {
        return embeddedCluster().node(1);
    }

    /** The responder's node in this JVM: only for nodes this experiment started. */
    PagewireNode responder() {
        return embeddedCluster().node(2);
    }

    private EmbeddedCluster embeddedCluster() {
        return nodes.embedded().orElseThrow(() -> new IllegalStateException("the nodes of a running cluster are not in this JVM"));
    }

    /** The requester's node's meters now. */
    NodeStats requesterStats() {
        return NodeStats.read(nodes.requester());
    }

    /** The responder's node's meters now. */
    NodeStats responderStats() {
        return NodeStats.read(nodes.responder());
    }

    /** The responder's node's id, for progress lines and errors. */
    String responderId() {
        return nodes.responder().node().nodeId();
    }

    /** Where the programs run, for a progress line. */
    String where() {
        return nodes.where();
    }

    VerbsPerftest programs() {
        return programs;
    }

    VerbsPerftest.Place requesterPlace() {
        return requesterPlace;
    }

    VerbsPerftest.Place responderPlace() {
        return responderPlace;
    }

    /** The median of a run's samples by {@code figure} (the upper one of an even count). */
    static <T> T median(List<T> samples, ToDoubleFunction<T> figure) {
        List<T> sorted = new ArrayList<>(samples);
        sorted.sort(Comparator.comparingDouble(figure));
        return sorted.get(sorted.size() / 2);
    }

    @Override
    public void close() {
        nodes.close();
    }
}
