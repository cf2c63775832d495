package io.pagewire.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.Pagewire;
import io.pagewire.ring.OwnerDirectory;
import java.io.File;
import java.io.IOException;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileStore;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A node killed with SIGKILL leaves its memory file (its emulated RAM, in tmpfs), rings and verbs
 * socket behind; the next node to start in the directory, or {@code pagewire clean}, removes them,
 * and never a live node's files: a node process holding 64 MiB of touched memory is killed twenty
 * times over and restarted, beside a live node, once alongside a second live node of the same id.
 */
class DeadNodeFilesTest {
    private static final long TOUCHED = 64L << 20;
    private Path directory;
    private final List<Process> started = new ArrayList<>();

    @BeforeEach
    void makeDirectory() throws IOException {
        Path shm = Path.of("/dev/shm");
        directory = Files.createTempDirectory(Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")),
                "pagewire-dead-owners-");
    }

    @AfterEach
    void removeDirectory() throws IOException {
        for (Process p : started) {
            p.destroyForcibly();
        }
        try (Stream<Path> files = Files.walk(directory)) {
            for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }

    @Test
    @Timeout(value = 6, unit = TimeUnit.MINUTES)
    void killedNodesLeaveNothingOnceTheNextStartsOrCleanRuns() throws Exception {
        FileStore tmpfs = Files.getFileStore(directory);
        long tmpfsBefore = used(tmpfs);
        Node bystander = start("bystander");
        List<Path> bystanderFiles = listing();
        long bystanderBytes = du(directory);

        Node previous = null;
        for (int round = 1; round <= 20; round++) {
            Node node = start("node-1");
            // What the previous incarnation left went when this one started; the bystander's are untouched.
            assertThat(ownerDirectories()).as("round %d: only the live nodes' directories", round)
                    .containsExactlyInAnyOrder(bystander.ownerDirectory(), node.ownerDirectory());
            assertThat(Files.exists(bystanderFiles.get(0))).isTrue();
            if (previous != null) {
                assertThat(node.log()).as("round %d: the new node says what it removed", round)
                        .contains(round == 11 ? "removed 2 dead owners" : "removed 1 dead owner");
            }
            node.touch(TOUCHED);
            if (round == 10) {
                // Two live nodes of one id on one host: neither takes the other's files.
                Node twin = start("node-1");
                assertThat(ownerDirectories()).containsExactlyInAnyOrder(bystander.ownerDirectory(), node.ownerDirectory(), twin.ownerDirectory());
                twin.touch(TOUCHED);
                twin.kill();
                assertThat(du(directory)).as("a dead twin's touched memory stays until someone removes it").isGreaterThan(bystanderBytes + TOUCHED);
            }
            node.kill();
            previous = node;
        }
        assertThat(ownerDirectories()).as("the last incarnation's directory, before anyone cleans").contains(previous.ownerDirectory());

        String out = clean(Map.of(), "--ring-directory", directory.toString());
        assertThat(out).contains("removed 1 dead owner", previous.ownerDirectory().getFileName().toString());
        assertThat(listing()).as("only the live node's files are left").containsExactlyInAnyOrderElementsOf(bystanderFiles);
        assertThat(du(directory)).as("bytes in the directory").isLessThanOrEqualTo(bystanderBytes + (1 << 20));
        assertThat(used(tmpfs)).as("tmpfs in use, %d before the test", tmpfsBefore).isLessThan(tmpfsBefore + bystanderBytes + (16L << 20));

        bystander.stop();
        assertThat(listing()).as("a node that stops removes its own").isEmpty();
    }

    @Test
    @Timeout(value = 2, unit = TimeUnit.MINUTES)
    void cleanNeverRemovesALiveNodesFilesAndSaysWhatItWouldRemove() throws Exception {
        Node live = start("live");
        Node dead = start("dead");
        dead.kill();
        // The directory from the nodes' own variable, as a container's environment gives it.
        String out = clean(Map.of("PAGEWIRE_NODE_RING_DIRECTORY", directory.toString()), "--dry-run");
        assertThat(out).contains("would remove " + dead.ownerDirectory(), "(dry run)");
        assertThat(ownerDirectories()).containsExactlyInAnyOrder(live.ownerDirectory(), dead.ownerDirectory());

        OwnerDirectory.Removal removal = OwnerDirectory.removeDead(directory, false);
        assertThat(removal.owners()).containsExactly(dead.ownerDirectory());
        assertThat(removal.links()).as("the dead node's names for its socket").hasSize(2);
        assertThat(ownerDirectories()).containsExactly(live.ownerDirectory());
        assertThat(OwnerDirectory.removeDead(directory, false).isEmpty()).as("a second pass finds nothing").isTrue();
        assertThat(Files.exists(directory.resolve("pagewire-live.verbs"))).as("the live node's socket by id").isTrue();
        live.stop();
    }

    /** The owner directories in the ring directory now. */
    private List<Path> ownerDirectories() throws IOException {
        try (Stream<Path> files = Files.list(directory)) {
            return files.filter(p -> p.getFileName().toString().endsWith(OwnerDirectory.SUFFIX)).toList();
        }
    }

    /** Every path in the directory, the owners' files included. */
    private List<Path> listing() throws IOException {
        try (Stream<Path> files = Files.walk(directory)) {
            return files.filter(p -> !p.equals(directory) && !p.toString().endsWith(".log")).sorted().toList();
        }
    }

    /** Bytes the directory's files take (their blocks, as du counts them: a sparse memory file only what was touched). */
    private static long du(Path directory) throws Exception {
        Process du = new ProcessBuilder("du", "-s", "-B1", "--exclude=*.log", directory.toString()).redirectErrorStream(true).start();
        String out = new String(du.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        assertThat(du.waitFor(30, TimeUnit.SECONDS)).isTrue();
        return Long.parseLong(out.split("\\s+")[0]);
    }

    private static long used(FileStore store) throws IOException {
        return store.getTotalSpace() - store.getUnallocatedSpace();
    }

    private Node start(String id) throws Exception {
        int port;
        try (ServerSocket free = new ServerSocket(0)) {
            port = free.getLocalPort();
        }
        List<Path> before = ownerDirectories();
        File log = directory.resolve(id + "-" + port + ".log").toFile();
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder builder = new ProcessBuilder(java, "-Xmx128m", "-cp", System.getProperty("java.class.path"), PagewireCommand.class.getName(),
                "node", "--id", id, "--host", "127.0.0.1", "--port", String.valueOf(port), "--metrics-port", "-1",
                "--set", "pagewire.security.transport=plaintext", "--set", "pagewire.kernel.physicalMemoryBytes=" + (2 * TOUCHED),
                "--set", "pagewire.quota.callerShare=1", "--set", "pagewire.node.ringDirectory=" + directory)
                .redirectErrorStream(true).redirectOutput(log);
        builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_"));
        Process process = builder.start();
        started.add(process);
        Node node = new Node(process, "127.0.0.1:" + port, log.toPath());
        node.awaitServing();
        List<Path> mine = new ArrayList<>(ownerDirectories());
        mine.removeAll(before);
        mine.removeIf(p -> !p.getFileName().toString().startsWith("pagewire-" + id + "-"));
        assertThat(mine).as("the directory node %s made", id).hasSize(1);
        node.ownerDirectory = mine.get(0);
        return node;
    }

    /** Runs {@code pagewire clean} with {@code args}: what it printed (it must succeed). */
    private static String clean(Map<String, String> environment, String... args) {
        PrintStream oldOut = System.out;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            String[] line = new String[args.length + 1];
            line[0] = "clean";
            System.arraycopy(args, 0, line, 1, args.length);
            int code = PagewireCommand.run(environment, line);
            assertThat(code).as(out.toString(StandardCharsets.UTF_8)).isZero();
            return out.toString(StandardCharsets.UTF_8);
        } finally {
            System.setOut(oldOut);
        }
    }

    /** One node process. */
    private static final class Node {
        private final Process process;
        private final String target;
        private final Path log;
        private Path ownerDirectory;

        Node(Process process, String target, Path log) {
            this.process = process;
            this.target = target;
            this.log = log;
        }

        Path ownerDirectory() {
            return ownerDirectory;
        }

        String log() throws IOException {
            return Files.readString(log);
        }

        private Pagewire connect() {
            // Over the stream: this JVM must not map the node's memory, or its pages would outlive the node.
            return Pagewire.connect(target, ConnectOptions.defaults().withSecurity(ClientSecurity.plaintext()).withSharedMemory(false)
                    .withDeadline(Duration.ofSeconds(30)));
        }

        void awaitServing() throws Exception {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) {
                assertThat(process.isAlive()).as("node at %s ended: %s", target, Files.exists(log) ? log() : "").isTrue();
                try (Pagewire connection = connect()) {
                    connection.node();
                    return;
                } catch (RuntimeException notYet) {
                    if (System.nanoTime() > deadline) {
                        throw new AssertionError("node at " + target + " did not serve within 60 s: " + log(), notYet);
                    }
                    Thread.sleep(100);
                }
            }
        }

        /** An application on the node touches {@code bytes} of its memory (and leaves them there). */
        void touch(long bytes) {
            try (Pagewire connection = connect()) {
                Endpoint endpoint = connection.openEndpoint("toucher");
                long address = endpoint.allocate(bytes);
                byte[] chunk = new byte[1 << 20];
                for (long at = 0; at < bytes; at += chunk.length) {
                    Arrays.fill(chunk, (byte) (1 + (at >>> 20)));
                    endpoint.store(address + at, chunk);
                }
                assertThat(endpoint.load(address + bytes - 1, 1)).containsOnly((byte) (bytes >>> 20));
                // Freed frames keep their bytes in the memory file (a node's RAM stays used): what is killed with it is 64 MiB.
            }
        }

        void kill() throws InterruptedException {
            process.destroyForcibly();
            assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        }

        void stop() throws InterruptedException {
            process.destroy();
            assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        }
    }
}
