package io.pagewire.tools.perf;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.cli.PagewireCommand;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The node processes a bench starts do not outlive it: a bench ended by a signal (Ctrl-C, a CI
 * job's timeout) stops them on its way out, as its own end does.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class NodeProcessesTest {
    @TempDir
    Path logs;

    /** A JVM that starts a pair of node processes, prints their PIDs, and waits to be ended. */
    public static final class HoldsNodes {
        public static void main(String[] args) throws Exception {
            NodeProcesses nodes = new NodeProcesses(PagewireCommand.class, "held", Map.of(), Path.of(args[0]), null);
            System.out.println("pids " + nodes.pids().stream().map(String::valueOf).reduce((a, b) -> a + " " + b).orElseThrow());
            System.out.flush();
            Thread.sleep(TimeUnit.MINUTES.toMillis(2));
        }
    }

    @Test
    void nodesStartedByAJvmThatIsEndedBySigtermStopWithIt() throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process holder = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), HoldsNodes.class.getName(), logs.toString())
                .redirectErrorStream(true).start();
        List<Long> pids = new ArrayList<>();
        try {
            BufferedReader out = new BufferedReader(new InputStreamReader(holder.getInputStream(), StandardCharsets.UTF_8));
            String line = CompletableFuture.supplyAsync(() -> {
                try {
                    for (String l; (l = out.readLine()) != null; ) {
                        if (l.startsWith("pids ")) {
                            return l;
                        }
                        System.out.println("holder: " + l);
                    }
                    return null;
                } catch (IOException e) {
                    return null;
                }
            }).get(120, TimeUnit.SECONDS);
            assertThat(line).as("the holder printed its nodes' PIDs").isNotNull();
            Arrays.stream(line.substring(5).split(" ")).map(Long::valueOf).forEach(pids::add);
            assertThat(pids).hasSize(2).allMatch(pid -> ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false));

            holder.destroy(); // SIGTERM, as Ctrl-C's SIGINT: shutdown hooks run
            assertThat(holder.waitFor(60, TimeUnit.SECONDS)).as("the holder ended").isTrue();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (pids.stream().anyMatch(NodeProcessesTest::alive) && System.nanoTime() < deadline) {
                Thread.sleep(100);
            }
            assertThat(pids).as("node processes still running after their holder ended").noneMatch(NodeProcessesTest::alive);
        } finally {
            holder.destroyForcibly();
            for (long pid : pids) {
                ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly); // only what this test started
            }
        }
    }

    private static boolean alive(long pid) {
        return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
    }
}
