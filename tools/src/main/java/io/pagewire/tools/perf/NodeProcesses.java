package io.pagewire.tools.perf;

import io.pagewire.client.ClientSecurity;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Two {@code pagewire node} processes on loopback, linked to each other, in plaintext or with mutual
 * TLS, started from this JVM's own class path (so the benchmark measures exactly the build that runs
 * it) and stopped by their PIDs.
 */
public final class NodeProcesses implements AutoCloseable {
    private final List<Process> processes = new ArrayList<>();
    private final List<String> targets = new ArrayList<>();
    private final ClientSecurity security;
    /** Stops the processes if this JVM ends before {@link #close} (a bench ended with Ctrl-C): none is left running. */
    private final Thread stopAtExit = new Thread(this::stop, "pagewire-node-processes-stop");

    /**
     * @param command the main class of the {@code pagewire} command, whose {@code node} subcommand each process runs
     * @param settings extra node settings ({@code --set name=value}) for both nodes
     * @param logDirectory where each node's output goes
     * @param certificates where {@code node-1}, {@code node-2} and the application {@code app} have their
     *     certificates (as {@code pagewire certs} writes them), for mutual TLS; null for plaintext
     */
    NodeProcesses(Class<?> command, String label, Map<String, String> settings, Path logDirectory, Path certificates) {
        security = certificates == null ? ClientSecurity.plaintext() : ClientSecurity.mutualTls(certificates, "app");
        int[] ports = {freePort(), freePort()};
        Runtime.getRuntime().addShutdownHook(stopAtExit);
        try {
            for (int i = 0; i < 2; i++) {
                int peer = 1 - i;
                List<String> line = new ArrayList<>(List.of(javaBinary(), "-cp", System.getProperty("java.class.path"),
                        command.getName(), "node", "--id", "node-" + (i + 1), "--host", "127.0.0.1",
                        "--port", String.valueOf(ports[i]), "--metrics-port", "-1", "--peer",
                        "node-" + (peer + 1) + "=127.0.0.1:" + ports[peer], "--set", certificates == null
                                ? "pagewire.security.transport=plaintext" : "pagewire.security.certificateDirectory=" + certificates));
                settings.forEach((name, value) -> line.addAll(List.of("--set", name + "=" + value)));
                File log = logDirectory.resolve(label + "-node-" + (i + 1) + ".log").toFile();
                ProcessBuilder builder = new ProcessBuilder(line).redirectErrorStream(true).redirectOutput(log);
                // The pair's settings are the ones given here, not whatever PAGEWIRE_ variables this shell has.
                builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_"));
                processes.add(builder.start());
                targets.add("127.0.0.1:" + ports[i]);
            }
            for (String target : targets) {
                awaitServing(target);
            }
        } catch (IOException | RuntimeException e) {
            close();
            throw e instanceof IOException io ? new UncheckedIOException("cannot start the node processes: " + io.getMessage(), io)
                    : (RuntimeException) e;
        }
    }

    /** How applications and probes reach the pair. */
    ClientSecurity security() {
        return security;
    }

    String requester() {
        return targets.get(0);
    }

    String responder() {
        return targets.get(1);
    }

    private void awaitServing(String target) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (true) {
            for (Process p : processes) {
                if (!p.isAlive()) {
                    throw new IllegalStateException("a node process ended with code " + p.exitValue() + " before it served");
                }
            }
            try (NodeProbe probe = new NodeProbe(target, security)) {
                if (!probe.describe().getPeersList().isEmpty()) {
                    return;
                }
            } catch (IllegalStateException notYet) {
                // not listening yet
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("node at " + target + " did not serve within 60 s");
            }
            sleep(200);
        }
    }

    private static String javaBinary() {
        return Path.of(System.getProperty("java.home"), "bin", "java").toString();
    }

    private static int freePort() {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    /** The processes' PIDs, node-1's first. */
    List<Long> pids() {
        return processes.stream().map(Process::pid).toList();
    }

    /** Stops both processes (SIGTERM, then SIGKILL after 10 s). */
    @Override
    public void close() {
        stop();
        try {
            Runtime.getRuntime().removeShutdownHook(stopAtExit);
        } catch (IllegalStateException e) {
            // The JVM is ending: the hook runs (and finds them stopped).
        }
    }

    private void stop() {
        for (Process p : processes) {
            p.destroy();
        }
        for (Process p : processes) {
            try {
                if (!p.waitFor(10, TimeUnit.SECONDS)) {
                    p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                p.destroyForcibly();
            }
        }
    }
}
