package io.pagewire.tools.perf;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * UCX's own perftest ({@code ucx_perftest} from Debian's {@code ucx-utils}) over TCP on loopback, the
 * reference a user-level networking stack is measured against: a server and a client process, the
 * client's CSV line read. Absent when the tool is not installed; then the bench says so.
 */
public final class Ucx {
    private final String binary;
    private String failure;

    private Ucx(String binary) {
        this.binary = binary;
    }

    /** ucx_perftest from the PATH, or an absent one. */
    public static Ucx find() {
        return new Ucx(ExternalPrograms.onPath("ucx_perftest"));
    }

    /** A UCX that is never run. */
    public static Ucx absent() {
        return new Ucx(null);
    }

    public boolean available() {
        return binary != null;
    }

    /** ucp_put_bw's bandwidth (MB/s as UCX prints it), or null when the run failed. */
    Double putBandwidthMbPerSec(int size, Bench.Budget budget) {
        long iterations = Math.max(1000, Math.min(500_000, (long) (budget.bandwidthSeconds() * 600e6 / size)));
        String[] row = run("ucp_put_bw", size, iterations, Math.max(100, iterations / 10));
        return row == null ? null : Double.parseDouble(row[5]);
    }

    /** ucp_put_lat's median one-way latency in microseconds (half a round trip), or null when the run failed. */
    Double putLatencyUs(int size, Bench.Budget budget) {
        String[] row = run("ucp_put_lat", size, budget.latencyIterations(), budget.latencyWarmup());
        return row == null ? null : Double.parseDouble(row[1]);
    }

    /**
     * tag_lat's typical one-way latency in microseconds, the server and the client started behind their
     * launch prefixes ({@code nice}, the verbs library's launcher and its node; empty over TCP) with
     * {@code environment} (UCX_TLS, ...), or null when the run failed ({@link #failure} says how).
     */
    Double tagLatencyUs(List<String> serverLaunch, List<String> clientLaunch, Map<String, String> environment, int size, long iterations,
            long warmup) {
        String[] row = run("tag_lat", size, iterations, warmup, serverLaunch, clientLaunch, environment);
        return row == null ? null : Double.parseDouble(row[1]);
    }

    /**
     * tag_bw's bandwidth (MB/s as UCX prints it), launched as {@link #tagLatencyUs} is, or null when the run
     * failed ({@link #failure} says how).
     */
    Double tagBandwidthMbPerSec(List<String> serverLaunch, List<String> clientLaunch, Map<String, String> environment, int size,
            long iterations, long warmup) {
        String[] row = run("tag_bw", size, iterations, warmup, serverLaunch, clientLaunch, environment);
        return row == null ? null : Double.parseDouble(row[5]);
    }

    /** Why the last run failed, for the log. */
    String failure() {
        return failure;
    }

    private String[] run(String test, int size, long iterations, long warmup) {
        return run(test, size, iterations, warmup, List.of(), List.of(), Map.of("UCX_TLS", "tcp", "UCX_NET_DEVICES", "lo"));
    }

    private String[] run(String test, int size, long iterations, long warmup, List<String> serverLaunch, List<String> clientLaunch,
            Map<String, String> environment) {
        int port = ExternalPrograms.freePort(13337);
        Process server = null;
        try {
            server = ExternalPrograms.builder(serverLaunch, List.of(binary, "-p", String.valueOf(port)), environment)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            List<String> client = List.of(binary, "127.0.0.1", "-p", String.valueOf(port), "-t", test, "-s", String.valueOf(size), "-n",
                    String.valueOf(iterations), "-w", String.valueOf(warmup), "-f", "-v");
            failure = "the server did not listen";
            for (int attempt = 0; attempt < 20 && server.isAlive(); attempt++) {
                Process p = ExternalPrograms.builder(clientLaunch, client, environment).start();
                if (!p.waitFor(120, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    failure = test + " did not finish in 120 s";
                    return null;
                }
                String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                for (String line : out.split("\n")) {
                    String[] columns = line.trim().split(",");
                    if (columns.length >= 6 && columns[0].matches("\\d+")) {
                        return columns;
                    }
                }
                failure = out;
                Thread.sleep(100); // the server was not listening yet
            }
            return null;
        } catch (IOException e) {
            failure = e.toString();
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        } finally {
            if (server != null) {
                server.destroy();
            }
        }
    }
}
