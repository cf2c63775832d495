package io.pagewire.tools.cli;

import io.pagewire.tools.perf.HopBreakdown;
import io.pagewire.tools.perf.HopRun;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/** {@code pagewire hops}: where one message's time goes, hop by hop, from the hop traces of a ping-pong. */
@Command(name = "hops", mixinStandardHelpOptions = true,
        description = {"Shows where the time of one message goes, hop by hop: from the sending program's post through its node's ring",
            "reader, NIC and gRPC lane to the peer node and the peer program's poll. With no directory it starts two plaintext node",
            "processes with their hop traces on, runs ib_send_lat (8 B) between them through the verbs library with its trace on,",
            "and reads the four traces; with a directory it reads the traces a run left there (the .hops files of two nodes,",
            "pagewire.node.hopTraceDirectory, and of one program on each, PAGEWIRE_VERBS_HOP_TRACE)."})
final class HopsCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(arity = "0..1", paramLabel = "DIRECTORY", description = "Read the traces in this directory instead of running.")
    Path directory;

    @Option(names = {"-n", "--iterations"}, description = "ib_send_lat's iterations in the traced run (default ${DEFAULT-VALUE}).",
            defaultValue = "20000")
    int iterations;

    @Option(names = "--warmup", description = "Iterations of each of the two untraced warm-up runs (default ${DEFAULT-VALUE}).",
            defaultValue = "20000")
    int warmup;

    @Option(names = "--skip", description = "With DIRECTORY: each sender's first posts to leave out (default: a tenth of them).",
            defaultValue = "-1")
    int skip;

    @Option(names = "--out", description = "Where the traces and the node processes' logs go (default ${DEFAULT-VALUE}).",
            defaultValue = "hops-results")
    Path out;

    @Option(names = {"-s", "--set"}, paramLabel = "NAME=VALUE", description = "A node setting for both node processes.")
    Map<String, String> settings = new LinkedHashMap<>();

    @Override
    public Integer call() {
        PrintWriter stdout = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (iterations < 100 || warmup < 0) {
            err.println("pagewire hops: --iterations takes at least 100 and --warmup zero or more");
            err.flush();
            return 2;
        }
        try {
            if (directory != null) {
                stdout.print(HopBreakdown.ofPingPong(directory, skip).table());
            } else {
                HopRun.Found found = HopRun.run(PagewireCommand.class, settings, out, warmup, iterations, err);
                if (found == null) {
                    return 1;
                }
                stdout.print(found.markdown());
                stdout.println("traces in " + found.traces());
            }
        } catch (IllegalArgumentException | IllegalStateException e) {
            err.println("pagewire hops: " + e.getMessage());
            err.flush();
            return 1;
        }
        stdout.flush();
        return 0;
    }
}
