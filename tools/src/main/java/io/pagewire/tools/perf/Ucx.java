package io.pagewire.tools.perf;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
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

    private String[] run(String test, int size, long iterations, long warmup) {
        int port = ExternalPrograms.freePort(13337);
        Map<String, String> tcpOnLoopback = Map.of("UCX_TLS", "tcp", "UCX_NET_DEVICES", "lo");
        Process server = null;
        try {
            ProcessBuilder serverBuilder = new ProcessBuilder(binary, "-p", String.valueOf(port)).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD);
            serverBuilder.environment().putAll(tcpOnLoopback);
            server = serverBuilder.start();
            List<String> command = new ArrayList<>(List.of(binary, "127.0.0.1", "-p", String.valueOf(port), "-t", test, "-s",
                    String.valueOf(size), "-n", String.valueOf(iterations), "-w", String.valueOf(warmup), "-f", "-v"));
            for (int attempt = 0; attempt < 20; attempt++) {
                ProcessBuilder clientBuilder = new ProcessBuilder(command).redirectErrorStream(true);
                clientBuilder.environment().putAll(tcpOnLoopback);
                Process client = clientBuilder.start();
                if (!client.waitFor(120, TimeUnit.SECONDS)) {
                    client.destroyForcibly();
                    return null;
                }
                String out = new String(client.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
                for (String line : out.split("\n")) {
                    String[] columns = line.trim().split(",");
                    if (columns.length >= 6 && columns[0].matches("\\d+")) {
                        return columns;
                    }
                }
                Thread.sleep(100); // the server was not listening yet
            }
            return null;
        } catch (IOException e) {
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
