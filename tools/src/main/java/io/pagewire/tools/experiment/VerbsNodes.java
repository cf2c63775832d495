package io.pagewire.tools.experiment;

import io.pagewire.node.NodeContext;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicCounters;
import io.pagewire.tools.perf.VerbsPerftest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.micrometer.core.instrument.Timer;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.ToDoubleFunction;

/**
 * Two nodes in this JVM for experiments that run stock verbs programs (perftest, rdma-core's
 * pingpongs) through the verbs library: the requester's program on node-1, the responder's on node-2,
 * and the nodes' counters read directly. The library and the programs must be installed (the build's
 * verbs-c module and its packages); without them an experiment says so instead of running.
 */
final class VerbsNodes implements AutoCloseable {
    private final EmbeddedCluster cluster;
    private final VerbsPerftest programs;

    private VerbsNodes(EmbeddedCluster cluster, VerbsPerftest programs) {
        this.cluster = cluster;
        this.programs = programs;
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
        return new VerbsNodes(cluster, VerbsPerftest.find());
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

    PagewireNode requester() {
        return cluster.node(1);
    }

    PagewireNode responder() {
        return cluster.node(2);
    }

    VerbsPerftest programs() {
        return programs;
    }

    VerbsPerftest.Place requesterPlace() {
        return VerbsPerftest.Place.host(requester().target());
    }

    VerbsPerftest.Place responderPlace() {
        return VerbsPerftest.Place.host(responder().target());
    }

    /** Every NIC counter of a node, summed over the registration modes, now. */
    static Map<NicCounter, Long> counters(PagewireNode node) {
        NicCounters counters = node.nic().counters();
        Map<NicCounter, Long> now = new EnumMap<>(NicCounter.class);
        for (NicCounter counter : NicCounter.values()) {
            now.put(counter, counters.get(counter));
        }
        return now;
    }

    /** A node's timer totals of one meter (all its tag combinations, or those whose {@code tag} is {@code value}): count and nanoseconds. */
    record TimerTotal(long count, double nanos) {
        TimerTotal since(TimerTotal before) {
            return new TimerTotal(count - before.count, nanos - before.nanos);
        }

        /** The mean in microseconds, or 0 when nothing was timed. */
        double meanUs() {
            return count == 0 ? 0 : nanos / count / 1e3;
        }
    }

    static TimerTotal timer(PagewireNode node, String name, String tag, String value) {
        var search = node.registry().find(name);
        if (tag != null) {
            search = search.tag(tag, value);
        }
        long count = 0;
        double nanos = 0;
        for (Timer timer : search.timers()) {
            count += timer.count();
            nanos += timer.totalTime(TimeUnit.NANOSECONDS);
        }
        return new TimerTotal(count, nanos);
    }

    /** The median of a run's samples by {@code figure} (the upper one of an even count). */
    static <T> T median(List<T> samples, ToDoubleFunction<T> figure) {
        List<T> sorted = new ArrayList<>(samples);
        sorted.sort(Comparator.comparingDouble(figure));
        return sorted.get(sorted.size() / 2);
    }

    /** What {@code counter} grew by from {@code before} to {@code after}. */
    static long grew(Map<NicCounter, Long> before, Map<NicCounter, Long> after, NicCounter counter) {
        return after.get(counter) - before.get(counter);
    }

    @Override
    public void close() {
        cluster.close();
    }
}
