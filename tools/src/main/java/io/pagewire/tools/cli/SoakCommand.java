package io.pagewire.tools.cli;

import io.pagewire.config.SettingType;
import io.pagewire.node.NodeSettings;
import java.io.PrintWriter;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code pagewire soak}: the chaos soak (and its long mode), ending with one summary line; exit status 1 on any invariant violation or growth. */
@Command(name = "soak", mixinStandardHelpOptions = true,
        description = {"Runs nodes in one JVM under all-to-all traffic in every mode (WRITE, WRITE_WITH_NOTIFY, SEND), memory pressure,",
            "injected loss, duplication, reordering, delay, link cuts and node restarts, checking the design's invariants as it goes and at the end:",
            "bytes exactly once and in order, notifications after their data, nothing acknowledged lost, pins and frames back to zero.",
            "Ends with one summary line; exit status 1 when any invariant was violated.",
            "--long runs it in phases (--phase) for as long as --duration says (hours, if you like), with applications, verbs programs",
            "and a node process of its own coming and going, a SIGKILL among them, and checks after every phase that nothing",
            "acknowledged was lost and nothing leaked (pins, frames, sessions, files in the ring directory, heap after GC, threads,",
            "file descriptors); its summary says what grew from the first phase to the last (exit status 1 then too)."})
final class SoakCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = "--nodes", defaultValue = "3", description = "Nodes (default ${DEFAULT-VALUE}).")
    int nodes;

    @Option(names = {"-d", "--duration"}, defaultValue = "120s", description = "How long to run (default ${DEFAULT-VALUE}).")
    String duration;

    @Option(names = "--seed", description = "Seed of the injected faults and link cuts (default: the clock).")
    Long seed;

    @Option(names = "--loss", defaultValue = "0.01", description = "Packet loss rate (default ${DEFAULT-VALUE}).")
    double loss;

    @Option(names = "--duplicate", defaultValue = "0.01", description = "Packet duplication rate (default ${DEFAULT-VALUE}).")
    double duplicate;

    @Option(names = "--reorder", defaultValue = "0.01", description = "Packet reordering rate (default ${DEFAULT-VALUE}).")
    double reorder;

    @Option(names = "--delay", defaultValue = "0", description = "Added delay of every batch (default ${DEFAULT-VALUE}; e.g. 200us).")
    String delay;

    @Option(names = "--no-link-cuts", description = "Do not cut links.")
    boolean noLinkCuts;

    @Option(names = "--no-restarts", description = "Do not restart nodes (one every 15 to 25 s otherwise, none in the last 20 s).")
    boolean noRestarts;

    @Option(names = "--max-operations", defaultValue = "100000000", description = "Stop after this many operations (default ${DEFAULT-VALUE}).")
    long maxOperations;

    @Option(names = "--long", description = "Run in phases, with churn and leak checks after each (see above).")
    boolean longMode;

    @Option(names = "--phase", defaultValue = "5m", description = "With --long: how long each phase lasts (default ${DEFAULT-VALUE}; at least 40s).")
    String phase;

    @Option(names = "--verbs-library", paramLabel = "FILE", description = "With --long: the verbs library its programs preload (default:"
            + " PAGEWIRE_VERBS_LIBRARY, the image's, or this checkout's build; none found: no programs).")
    java.nio.file.Path verbsLibrary;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        if (nodes < 2 || nodes > 8) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(), "--nodes must be from 2 to 8, was " + nodes);
        }
        Soak.Settings settings;
        try {
            settings = new Soak.Settings(nodes, SettingType.nanos("--duration", duration), seed == null ? System.nanoTime() : seed, loss,
                    duplicate, reorder, SettingType.nanos("--delay", delay), !noLinkCuts, !noRestarts, maxOperations);
        } catch (IllegalArgumentException e) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        for (double rate : new double[] {loss, duplicate, reorder}) {
            if (rate < 0 || rate >= 1) {
                throw new picocli.CommandLine.ParameterException(spec.commandLine(), "--loss, --duplicate and --reorder are probabilities from 0 to"
                        + " below 1, was " + rate);
            }
        }
        out.printf("soak: %d nodes for %s, seed %d (replay with --seed)%n", nodes, duration, settings.seed());
        out.flush();
        if (longMode) {
            long phaseNs;
            try {
                phaseNs = SettingType.nanos("--phase", phase);
            } catch (IllegalArgumentException e) {
                throw new picocli.CommandLine.ParameterException(spec.commandLine(), e.getMessage());
            }
            if (phaseNs < 40_000_000_000L) {
                throw new picocli.CommandLine.ParameterException(spec.commandLine(), "--phase must be at least 40s (a phase restarts nodes"
                        + " and lets the streams through them begin again), was " + phase);
            }
            LongSoak.Result result = new LongSoak(settings, phaseNs, verbsLibrary != null ? verbsLibrary
                    : io.pagewire.tools.perf.VerbsPerftest.library(), out).run();
            out.println(result.summary(settings));
            result.violations().forEach(v -> out.println("soak --long: VIOLATION " + v));
            out.flush();
            return result.violations().isEmpty() && result.grew().isEmpty() ? 0 : 1;
        }
        Soak.Result result = new Soak(settings, out).run();
        out.println(result.summary(settings));
        out.flush();
        return result.violations().isEmpty() ? 0 : 1;
    }
}
