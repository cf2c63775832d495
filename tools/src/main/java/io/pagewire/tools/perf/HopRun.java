package io.pagewire.tools.perf;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One traced ping-pong: two node processes started with their hop traces on, Debian's {@code ib_send_lat}
 * (8-byte SENDs) between them through the verbs library with its trace on, and the {@link HopBreakdown}
 * of what the four processes wrote. The nodes are warmed first by untraced runs of the same program, so
 * that the traced one meets compiled code.
 */
public final class HopRun {
    /** The message size the breakdown follows: UCX's and MPI's small-message latency is quoted at 8 bytes. */
    static final int SIZE = 8;

    private HopRun() {
    }

    /** What a run found: the breakdown, and the program's own typical one-way latency in the same run. */
    public record Found(HopBreakdown.Result breakdown, double programTypicalUs, Path traces, String nodeWaits) {
        /** A Markdown section: what was run, the hop table, the program's own figure beside it. */
        public String markdown() {
            return String.format(Locale.ROOT, """
                    ## Where one message's time goes

                    One 8-byte SEND of `ib_send_lat -s %d` (perftest, through the verbs library) between two plaintext node processes,
                    followed hop by hop from the hop traces of both programs and both nodes (the library's `PAGEWIRE_VERBS_HOP_TRACE`,
                    the nodes' `pagewire.node.hopTraceDirectory`; `pagewire hops` runs it alone). Each row is the time from the step
                    before to the step it names, over the messages of both directions; ib_send_lat's own typical one-way figure in
                    the same run: %.1f us.

                    %s%s""", SIZE, programTypicalUs, breakdown.table(), nodeWaits == null ? ""
                    : "While the traced run lasted, the two nodes' threads spent " + nodeWaits + ", from the kernel's schedstat.\n");
        }
    }

    /**
     * Runs it: node processes of {@code command} with {@code nodeSettings}, warm-up runs of {@code warmupIterations},
     * then a traced run of {@code iterations}; the traces and the nodes' logs go under {@code directory}. Null when
     * ib_send_lat or the library is not installed ({@code log} says so).
     */
    public static Found run(Class<?> command, Map<String, String> nodeSettings, Path directory, int warmupIterations, int iterations,
            PrintWriter log) {
        VerbsPerftest verbs = VerbsPerftest.find();
        String program = ExternalPrograms.onPath("ib_send_lat");
        if (!verbs.available() || program == null) {
            log.println("# hop breakdown: not measured (ib_send_lat or the verbs library is not installed)");
            log.flush();
            return null;
        }
        Path traces = directory.resolve("hops");
        try {
            Files.createDirectories(traces);
            try (var old = Files.list(traces)) {
                for (Path f : old.filter(f -> f.toString().endsWith(".hops")).toList()) {
                    Files.delete(f);
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot prepare " + traces + ": " + e.getMessage(), e);
        }
        Map<String, String> settings = new LinkedHashMap<>(nodeSettings);
        settings.put("pagewire.node.hopTraceDirectory", traces.toAbsolutePath().toString());
        VerbsPerftest.PairRun traced;
        String nodeWaits;
        try (NodeProcesses pair = new NodeProcesses(command, "hops", settings, directory, null)) {
            for (int i = 0; i < 2; i++) {
                log.printf("# hop breakdown: warm-up %d of 2 (ib_send_lat, %,d iterations)%n", i + 1, warmupIterations);
                log.flush();
                VerbsPerftest.PairRun warm = verbs.runPair(program, VerbsPerftest.Place.host(pair.requester()), VerbsPerftest.Place.host(pair.responder()),
                        options(warmupIterations), Map.of(), output -> VerbsPerftest.resultRow(output) != null);
                if (warm.output() == null) {
                    throw new IllegalStateException("ib_send_lat failed on the traced pair: " + warm.failure());
                }
            }
            log.printf("# hop breakdown: traced run (%,d iterations)%n", iterations);
            log.flush();
            RunQueueWait before = RunQueueWait.available() ? RunQueueWait.snapshot(pair.pids()) : null;
            traced = verbs.runPair(program, VerbsPerftest.Place.host(pair.requester()), VerbsPerftest.Place.host(pair.responder()),
                    options(iterations), Map.of("PAGEWIRE_VERBS_HOP_TRACE", traces.toAbsolutePath().toString()),
                    output -> VerbsPerftest.resultRow(output) != null);
            if (traced.output() == null) {
                throw new IllegalStateException("the traced ib_send_lat failed: " + traced.failure());
            }
            // Each iteration is one SEND each way.
            nodeWaits = before == null ? null : RunQueueWait.snapshot(pair.pids()).since(before).perMessage(2L * iterations);
        } // the nodes write their traces as they stop
        String[] row = VerbsPerftest.resultRow(traced.output());
        return new Found(HopBreakdown.ofPingPong(traces, iterations / 10), Double.parseDouble(row[4]), traces, nodeWaits);
    }

    private static List<String> options(int iterations) {
        return List.of("-s", String.valueOf(SIZE), "-n", String.valueOf(iterations));
    }
}
