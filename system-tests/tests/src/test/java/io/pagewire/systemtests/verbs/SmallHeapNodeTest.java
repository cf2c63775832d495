package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.Pagewire;
import io.pagewire.tools.cli.PagewireCommand;
import java.io.File;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The node's physical memory is off the Java heap: a node process whose heap is a sixteenth of its
 * emulated memory starts, and an application fills half of that memory and reads it back.
 */
class SmallHeapNodeTest {
    private static final long EMULATED = 1L << 30;
    private static final long FILLED = 512L << 20;

    @Test
    @Timeout(value = 3, unit = TimeUnit.MINUTES)
    void aNodeWithAGibibyteOfMemoryRunsInA64MebibyteHeap() throws Exception {
        Path shm = Path.of("/dev/shm");
        Path rings = Files.createTempDirectory(Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")),
                "pagewire-small-heap-");
        int port;
        try (ServerSocket free = new ServerSocket(0)) {
            port = free.getLocalPort();
        }
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        File log = rings.resolve("node.log").toFile();
        ProcessBuilder builder = new ProcessBuilder(java, "-Xmx64m", "-cp", System.getProperty("java.class.path"), PagewireCommand.class.getName(),
                "node", "--id", "small-heap", "--host", "127.0.0.1", "--port", String.valueOf(port), "--metrics-port", "-1",
                "--set", "pagewire.security.transport=plaintext", "--set", "pagewire.kernel.physicalMemoryBytes=" + EMULATED,
                "--set", "pagewire.quota.callerShare=1", "--set", "pagewire.node.ringDirectory=" + rings)
                .redirectErrorStream(true).redirectOutput(log);
        builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_"));
        Process node = builder.start();
        try (Pagewire connection = connect("127.0.0.1:" + port, node, log)) {
            Endpoint endpoint = connection.openEndpoint("fills-memory");
            assertThat(endpoint.sharesMemory()).isTrue();
            long address = endpoint.allocate(FILLED);
            byte[] chunk = new byte[1 << 20];
            for (long at = 0; at < FILLED; at += chunk.length) {
                Arrays.fill(chunk, (byte) (at >>> 20));
                endpoint.store(address + at, chunk);
            }
            for (long at = 0; at < FILLED; at += 64L << 20) {
                assertThat(endpoint.load(address + at + 4095, 2)).as("MiB " + (at >>> 20)).containsOnly((byte) (at >>> 20));
            }
            assertThat(node.isAlive()).as("the node process runs on (its log: " + log + ")").isTrue();
        } finally {
            node.destroy();
            node.waitFor(20, TimeUnit.SECONDS);
            node.destroyForcibly();
            try (Stream<Path> files = Files.walk(rings)) {
                assertThat(files.filter(p -> p.toString().endsWith(".memory")).toList()).as("the node removed its memory file").isEmpty();
            }
            try (Stream<Path> files = Files.walk(rings)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.deleteIfExists(p);
                }
            }
        }
    }

    /** Connects once the node serves, or fails with its log. */
    private static Pagewire connect(String target, Process node, File log) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        ConnectOptions options = ConnectOptions.defaults().withSecurity(ClientSecurity.plaintext()).withDeadline(Duration.ofSeconds(20));
        while (true) {
            if (!node.isAlive()) {
                throw new AssertionError("the node process exited with " + node.exitValue() + ": " + String.join("\n", lines(log)));
            }
            try {
                Pagewire connection = Pagewire.connect(target, options);
                connection.node();
                return connection;
            } catch (RuntimeException notYet) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("the node did not serve within 60 s: " + String.join("\n", lines(log)), notYet);
                }
                Thread.sleep(200);
            }
        }
    }

    private static List<String> lines(File log) throws Exception {
        return Files.readAllLines(log.toPath());
    }
}
