package io.pagewire.tools.cli;

import io.pagewire.config.SettingType;
import io.pagewire.node.NodeSettings;
import java.io.PrintWriter;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code pagewire soak}: the chaos soak, ending with one summary line; exit status 1 on any invariant violation. */
@Command(name = "soak", mixinStandardHelpOptions = true,
        description = {"Runs nodes in one JVM under all-to-all traffic in every mode (WRITE, WRITE_WITH_NOTIFY, SEND), memory pressure,",
            "injected loss, duplication, reordering, delay, link cuts and node restarts, checking the design's invariants as it goes and at the end:",
            "bytes exactly once and in order, notifications after their data, nothing acknowledged lost, pins and frames back to zero.",
            "Ends with one summary line; exit status 1 when any invariant was violated."})
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
        Soak.Result result = new Soak(settings, out).run();
        out.println(result.summary(settings));
        out.flush();
        return result.violations().isEmpty() ? 0 : 1;
    }
}
