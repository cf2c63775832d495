package io.pagewire.tools.perf;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * Debian's perftest ({@code ib_write_bw}, {@code ib_write_lat}) run unmodified on a node pair through
 * the verbs library, as a user runs it: a server on the responder's node, its client on the
 * requester's, the library preloaded and {@code PAGEWIRE_NODE} naming each one's node. The programs run
 * at a lower CPU priority than the nodes ({@link #NICE}): their pollers spin, and on a machine of few
 * cores the node threads that are their NIC must not wait behind them, yet a program must still get a
 * core beside busy-polling nodes. Absent when perftest or the library is not installed; the bench then
 * says so.
 */
public final class VerbsPerftest {
    /** Where the library is looked for when PAGEWIRE_VERBS_LIBRARY does not say: the image's place, then the source tree's build. */
    private static final List<String> LIBRARY_PLACES = List.of("/usr/lib/pagewire/libpagewire-verbs.so", "verbs-c/target/libpagewire-verbs.so");
    /** Where the node image keeps the library (the Dockerfile). */
    static final String IMAGE_LIBRARY = "/usr/lib/pagewire/libpagewire-verbs.so";

    /**
     * The programs' niceness: at 19 they waited behind busy-polling nodes (ib_write_lat typical one-way
     * 106 us against 39 us at 5, same nodes); at 0 the nodes waited behind them (59 us).
     */
    static final int NICE = 5;

    private final Path library;
    private final String writeBw;
    private final String writeLat;

    private VerbsPerftest(Path library, String writeBw, String writeLat) {
        this.library = library;
        this.writeBw = writeBw;
        this.writeLat = writeLat;
    }

    /** The library (PAGEWIRE_VERBS_LIBRARY, the image's, or this source tree's build) and perftest from the PATH, or an absent one. */
    public static VerbsPerftest find() {
        Path library = library();
        String bw = ExternalPrograms.onPath("ib_write_bw");
        String lat = ExternalPrograms.onPath("ib_write_lat");
        return library == null || bw == null || lat == null ? absent() : new VerbsPerftest(library, bw, lat);
    }

    public static VerbsPerftest absent() {
        return new VerbsPerftest(null, null, null);
    }

    public boolean available() {
        return library != null;
    }

    /**
     * The verbs library to preload: the system property {@code pagewire.verbs.library} or PAGEWIRE_VERBS_LIBRARY, the image's,
     * or this source tree's build; null when none is there.
     */
    public static Path library() {
        String configured = System.getProperty("pagewire.verbs.library", System.getenv("PAGEWIRE_VERBS_LIBRARY"));
        List<String> places = new ArrayList<>();
        if (configured != null && !configured.isBlank()) {
            places.add(configured);
        }
        places.addAll(LIBRARY_PLACES);
        for (String place : places) {
            Path p = Path.of(place).toAbsolutePath();
            if (Files.isRegularFile(p)) {
                return p;
            }
        }
        return null;
    }

    /** What the bench's header says about it: the library as a user finds it (relative to the checkout it was built in, or the image's path). */
    public String describe() {
        return available() ? "perftest (ib_write_bw, ib_write_lat) through the verbs library " + shown(library) + "."
                : "Verbs programs: not measured (perftest or the verbs library is not installed).";
    }

    /** A path under the working directory (the checkout) relative to it; any other as it is. */
    static String shown(Path path) {
        Path here = Path.of("").toAbsolutePath();
        return path.startsWith(here) ? here.relativize(path).toString() : path.toString();
    }

    /**
     * Where one side of a perftest program runs: on this host, with this checkout's (or the image's)
     * library preloaded and {@code node} naming its node, or inside a node's container (its image's
     * library, the node named by {@code node} or, when null, by the container's own PAGEWIRE_NODE).
     */
    public record Place(String node, String container) {
        public static Place host(String target) {
            return new Place(target, null);
        }

        public static Place inContainer(String container) {
            return new Place(null, container);
        }
    }

    /**
     * ib_write_bw's messages and their rate in millions a second (its MsgRate column), run with
     * {@code options} on both sides, or null when the run failed ({@link #failure} says how).
     */
    public MessageRate writeMessageRate(Place requester, Place responder, List<String> options) {
        String[] row = run(writeBw, requester, responder, options, Map.of());
        return row == null || row.length < 5 ? null : new MessageRate(Long.parseLong(row[1]), Double.parseDouble(row[4]));
    }

    /**
     * One ib_write_bw run with {@code options} on both sides, for jobs of several that run together
     * (safe from several threads): its output when it finished with its result row, else why not.
     */
    public PairRun writeBwRun(Place requester, Place responder, List<String> options) {
        return runPair(writeBw, requester, responder, options, Map.of(), output -> resultRow(output) != null);
    }

    /** What ib_write_bw reports of a run: the messages it sent (its #iterations) and their rate in millions a second. */
    public record MessageRate(long messages, double mpps) {
    }

    /** ib_write_lat's one-way figures in microseconds (half a round trip): typical and 99th percentile. */
    record Latency(double typicalUs, double p99Us) {
    }

    /** ib_write_bw's average bandwidth in MB/s at {@code size} for {@code seconds}, or null when the run failed. */
    Double writeBandwidthMbPerSec(String requester, String responder, int size, double seconds) {
        return writeBandwidthMbPerSec(Place.host(requester), Place.host(responder), size, seconds);
    }

    /** As {@link #writeBandwidthMbPerSec(String, String, int, double)}, wherever the two sides run. */
    public Double writeBandwidthMbPerSec(Place requester, Place responder, int size, double seconds) {
        String[] row = run(writeBw, requester, responder, List.of("-s", String.valueOf(size), "-D", String.valueOf(Math.max(1, Math.round(seconds)))),
                Map.of());
        return row == null || row.length < 4 ? null : Double.parseDouble(row[3]);
    }

    /**
     * A perftest bandwidth program's ({@code ib_write_bw}, {@code ib_send_bw}, ...) average bandwidth in MB/s
     * and message rate with {@code options} on both sides, or null when the run failed ({@link #failure} says how).
     */
    public Bandwidth bandwidth(String program, Place requester, Place responder, List<String> options) {
        String path = ExternalPrograms.onPath(program);
        if (path == null || library == null) {
            failure = program + " or the verbs library is not installed";
            return null;
        }
        String[] row = run(path, requester, responder, options, Map.of());
        return row == null || row.length < 5 ? null : new Bandwidth(Double.parseDouble(row[3]), Double.parseDouble(row[4]));
    }

    /** What a perftest bandwidth program reports: its average bandwidth (MB/s) and message rate (millions a second). */
    public record Bandwidth(double averageMbPerSec, double mpps) {
    }

    /** ib_write_lat's typical one-way latency in microseconds (half a round trip), or null when the run failed. */
    Double writeLatencyTypicalUs(String requester, String responder, int size, int iterations) {
        Latency latency = writeLatency(Place.host(requester), Place.host(responder), size, iterations);
        return latency == null ? null : latency.typicalUs();
    }

    /** ib_write_lat's one-way typical and 99th percentile, wherever the two sides run; null when the run failed. */
    Latency writeLatency(Place requester, Place responder, int size, int iterations) {
        String[] row = run(writeLat, requester, responder, List.of("-s", String.valueOf(size), "-n", String.valueOf(iterations)), Map.of());
        return row == null || row.length < 8 ? null : new Latency(Double.parseDouble(row[4]), Double.parseDouble(row[7]));
    }

    /**
     * The figures of a perftest latency program's result row, in microseconds: ib_write_lat and
     * ib_send_lat report half a round trip, ib_read_lat and the atomics a whole one.
     */
    public record LatencyRow(long iterations, double minUs, double maxUs, double typicalUs, double averageUs, double p99Us, double p999Us) {
        static LatencyRow parse(String[] row) {
            if (row == null || row.length < 9) {
                return null;
            }
            return new LatencyRow(Long.parseLong(row[1]), Double.parseDouble(row[2]), Double.parseDouble(row[3]), Double.parseDouble(row[4]),
                    Double.parseDouble(row[5]), Double.parseDouble(row[7]), Double.parseDouble(row[8]));
        }
    }

    /**
     * Runs a perftest latency program ({@code ib_read_lat}, {@code ib_write_lat}, ...) found on the PATH
     * between two places on this host, with {@code options} on both sides and {@code environment} added
     * to both (PAGEWIRE_VERBS_REGISTRATION, say).
     *
     * @return its result row, or null when the run failed ({@link #failure} says how)
     */
    public LatencyRow latency(String program, Place requester, Place responder, List<String> options, Map<String, String> environment) {
        String path = ExternalPrograms.onPath(program);
        if (path == null || library == null) {
            failure = program + " or the verbs library is not installed";
            return null;
        }
        return LatencyRow.parse(run(path, requester, responder, options, environment));
    }

    /**
     * A latency run with its iterations' figures: perftest's result row and the latencies its {@code -H}
     * lists, in microseconds, ascending. The list leaves out the two longest iterations; the longest is
     * the row's maximum and is counted here, the second longest is not known.
     */
    public record LatencyRun(LatencyRow row, double[] iterationsUs) {
        /** The listed iterations and the longest, which the list leaves out. */
        private double[] known() {
            double[] all = Arrays.copyOf(iterationsUs, iterationsUs.length + 1);
            all[iterationsUs.length] = row.maxUs();
            return all;
        }

        /** How many iterations took at least {@code us} (of those known: one more may have). */
        public int atLeast(double us) {
            return (int) Arrays.stream(known()).filter(v -> v >= us).count();
        }

        /** The mean of the known iterations that took at least {@code us}, or NaN when none did. */
        public double meanAtLeast(double us) {
            return Arrays.stream(known()).filter(v -> v >= us).average().orElse(Double.NaN);
        }
    }

    /**
     * Runs a perftest latency program as {@link #latency} does, with {@code -H}, which lists every
     * iteration's latency: what a tail made of rare events needs, where the percentiles hide them.
     *
     * @return the row and the iterations, or null when the run failed ({@link #failure} says how)
     */
    public LatencyRun latencyWithIterations(String program, Place requester, Place responder, List<String> options,
            Map<String, String> environment) {
        String path = ExternalPrograms.onPath(program);
        if (path == null || library == null) {
            failure = program + " or the verbs library is not installed";
            return null;
        }
        List<String> withHistogram = new ArrayList<>(options);
        withHistogram.add("-H");
        String out = pair(path, requester, responder, withHistogram, environment, output -> resultRow(output) != null);
        LatencyRow row = out == null ? null : LatencyRow.parse(resultRow(out));
        if (row == null) {
            return null;
        }
        return new LatencyRun(row, out.lines().map(String::trim).filter(line -> line.matches("\\d+, [\\d.]+"))
                .mapToDouble(line -> Double.parseDouble(line.substring(line.indexOf(',') + 1).trim())).sorted().toArray());
    }

    /** Why the last run failed: the client's output. */
    public String failure() {
        return failure;
    }

    /** The output of the last run that failed, for the bench's log. */
    String failure = "";

    /** Runs a server on the responder's node and its client on the requester's; the client's result row, or null. */
    private String[] run(String program, Place requester, Place responder, List<String> options, Map<String, String> environment) {
        String out = pair(program, requester, responder, options, environment, output -> resultRow(output) != null);
        return out == null ? null : resultRow(out);
    }

    /**
     * Runs a program pair of the perftest and rdma-core pingpong kind (a server given {@code options},
     * its client the same and the server's address) on the responder's node and the requester's, the
     * client tried again while the server is not listening yet.
     *
     * @param program the program's path (or its name, in a container)
     * @param finished whether the client's output is that of a run that finished
     * @return the client's output, or null when it did not finish ({@link #failure} says how)
     */
    public String pair(String program, Place requester, Place responder, List<String> options, Map<String, String> environment,
            Predicate<String> finished) {
        PairRun run = runPair(program, requester, responder, options, environment, finished);
        if (run.output() == null) {
            failure = run.failure();
        }
        return run.output();
    }

    /** How a program pair ended: the client's output when it finished, else why not (the client's or the server's output). */
    public record PairRun(String output, String failure) {
    }

    /**
     * As {@link #pair}, safe to call from several threads at once (each pair has its own port), for
     * jobs of programs that run together. A server that exits before its client has finished (it
     * could not register its buffer, say) ends the run at once, its output the failure.
     */
    public PairRun runPair(String program, Place requester, Place responder, List<String> options, Map<String, String> environment,
            Predicate<String> finished) {
        int port = ExternalPrograms.freePort(18515);
        Process server = null;
        Path serverOutput = null;
        Path clientOutput = null;
        try {
            serverOutput = Files.createTempFile("pagewire-perftest-server", ".out");
            clientOutput = Files.createTempFile("pagewire-perftest-client", ".out");
            server = start(program, responder, port, options, environment, null).redirectOutput(serverOutput.toFile()).start();
            String serverHost = responder.container() == null ? "127.0.0.1" : containerAddress(responder.container());
            String failed = "";
            for (int attempt = 0; attempt < 20; attempt++) {
                Thread.sleep(200); // the server opens its device and listens for the client
                if (!server.isAlive()) {
                    return new PairRun(null, "the server exited with status " + server.exitValue() + " before its client finished: "
                            + Files.readString(serverOutput, StandardCharsets.UTF_8) + "\nthe client: " + failed);
                }
                // Into a file, not a pipe: perftest prints a line per queue pair, more than a pipe holds before the program blocks on it.
                Process client = start(program, requester, port, options, environment, serverHost).redirectErrorStream(true)
                        .redirectOutput(clientOutput.toFile()).start();
                if (!client.waitFor(180, TimeUnit.SECONDS)) {
                    client.destroyForcibly();
                    return new PairRun(null, program + " did not finish in 180 s: " + Files.readString(clientOutput, StandardCharsets.UTF_8));
                }
                String out = Files.readString(clientOutput, StandardCharsets.UTF_8);
                if (finished.test(out)) {
                    return new PairRun(out, null);
                }
                failed = out;
                if (!out.contains("Couldn't connect") && !out.contains("Unable to open") && !out.contains("Connection refused")) {
                    // A client that fails after connecting often fails because its server did (it could not register, say): say why.
                    if (server.waitFor(2, TimeUnit.SECONDS)) {
                        out += "\nthe server exited with status " + server.exitValue() + ": " + Files.readString(serverOutput, StandardCharsets.UTF_8);
                    }
                    return new PairRun(null, out);
                }
            }
            return new PairRun(null, failed);
        } catch (IOException e) {
            return new PairRun(null, e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new PairRun(null, "interrupted");
        } finally {
            if (server != null) {
                stop(server);
            }
            for (Path output : new Path[] {serverOutput, clientOutput}) {
                try {
                    if (output != null) {
                        Files.deleteIfExists(output);
                    }
                } catch (IOException ignored) {
                    // a temporary file left behind is no reason to fail the run
                }
            }
        }
    }

    /**
     * One side. In a container it runs under docker exec with the image's library, bounded by
     * timeout(1) there: killing the docker client would leave the program running in the container.
     */
    private ProcessBuilder start(String program, Place place, int port, List<String> options, Map<String, String> environment, String serverHost) {
        List<String> command = new ArrayList<>();
        if (place.container() != null) {
            command.addAll(List.of("docker", "exec", "-e", "LD_PRELOAD=" + IMAGE_LIBRARY));
            environment.forEach((name, value) -> command.addAll(List.of("-e", name + "=" + value)));
            if (place.node() != null) {
                command.addAll(List.of("-e", "PAGEWIRE_NODE=" + place.node()));
            }
            command.addAll(List.of(place.container(), "timeout", "200", "nice", "-n", String.valueOf(NICE), Path.of(program).getFileName().toString()));
        } else {
            command.addAll(List.of("nice", "-n", String.valueOf(NICE), program));
        }
        command.addAll(List.of("-d", "pagewire0", "-p", String.valueOf(port)));
        command.addAll(options);
        if (serverHost != null) {
            command.add(serverHost);
        }
        ProcessBuilder builder = new ProcessBuilder(command);
        if (serverHost == null) {
            builder.redirectErrorStream(true);
        }
        if (place.container() == null) {
            builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_"));
            builder.environment().put("LD_PRELOAD", library.toString());
            builder.environment().put("PAGEWIRE_NODE", place.node());
            builder.environment().putAll(environment);
        }
        return builder;
    }

    /**
     * Ends a server: it has 5 s to finish on its own after its client did (perftest's server ends with its
     * run, and writes its hop trace as it exits), then it is killed.
     */
    private static void stop(Process server) {
        try {
            if (server.waitFor(5, TimeUnit.SECONDS)) {
                return;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        server.destroyForcibly();
    }

    /** A container's address on its network, where the other side's client reaches its server. */
    private static String containerAddress(String container) throws IOException, InterruptedException {
        Process inspect = new ProcessBuilder("docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container)
                .redirectErrorStream(true).start();
        String out = new String(inspect.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        if (!inspect.waitFor(30, TimeUnit.SECONDS) || inspect.exitValue() != 0 || out.isEmpty()) {
            throw new IOException("cannot find the address of container " + container + ": " + out);
        }
        return out.split("\\s+")[0];
    }

    /** The numbers under perftest's "#bytes" header line. */
    static String[] resultRow(String output) {
        String[] lines = output.split("\n");
        for (int i = 0; i + 1 < lines.length; i++) {
            if (lines[i].trim().startsWith("#bytes")) {
                String[] columns = lines[i + 1].trim().split("\\s+");
                if (columns.length >= 4 && columns[0].matches("\\d+")) {
                    return columns;
                }
            }
        }
        return null;
    }
}
