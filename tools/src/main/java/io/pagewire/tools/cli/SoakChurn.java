package io.pagewire.tools.cli;

import io.pagewire.client.Access;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.PagewireNode;
import io.pagewire.ring.OwnerDirectory;
import io.pagewire.tools.perf.ExternalPrograms;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * What comes and goes around the long soak's streams, as it would around a testbed left running:
 * applications that open endpoints, write to each other and end (some politely, some by dropping their
 * connection), unmodified verbs programs (rdma-core's ibv_rc_pingpong through the verbs library) that
 * run to their end or are killed with SIGKILL mid-run, and a node process of its own, beside the
 * soak's nodes in their ring directory, killed with SIGKILL while it holds touched memory and started
 * again: the new one must have removed what the killed one left.
 */
final class SoakChurn implements Soak.Churn {
    private static final int APP_BYTES = 64 << 10;
    private static final List<RegistrationMode> MODES = List.of(RegistrationMode.values());

    private final long seed;
    private final Path ringDirectory;
    private final Path library;
    private final String pingpong;
    final AtomicLong applications = new AtomicLong();
    final AtomicLong applicationsDropped = new AtomicLong();
    final AtomicLong applicationsFailed = new AtomicLong();
    final AtomicLong programs = new AtomicLong();
    final AtomicLong programsKilled = new AtomicLong();
    final AtomicLong programsCompleted = new AtomicLong();
    final AtomicLong nodeKills = new AtomicLong();

    /**
     * @param ringDirectory the soak's ring directory, where its own node process lives too
     * @param library the verbs library to preload into programs, or null to run none
     */
    SoakChurn(long seed, Path ringDirectory, Path library) {
        this.seed = seed;
        this.ringDirectory = ringDirectory;
        this.library = library;
        this.pingpong = library == null ? null : ExternalPrograms.onPath("ibv_rc_pingpong");
    }

    /** Whether verbs programs come and go too (the library was built and ibv_rc_pingpong is installed). */
    boolean runsPrograms() {
        return pingpong != null;
    }

    /** One line for the phase's summary. */
    String describe() {
        return String.format("%d applications came and went (%d dropped their connection, %d failed under the faults), %s, %d node process"
                + " killed with SIGKILL and started again", applications.get(), applicationsDropped.get(), applicationsFailed.get(),
                runsPrograms() ? programs.get() + " verbs programs (" + programsCompleted.get() + " completed, " + programsKilled.get()
                        + " killed mid-run)" : "no verbs programs (the library or ibverbs-utils is missing)", nodeKills.get());
    }

    @Override
    public void run(EmbeddedCluster cluster, long deadline, BooleanSupplier stopping, Consumer<String> violation) {
        SplittableRandom random = new SplittableRandom(seed);
        long end = deadline - TimeUnit.SECONDS.toNanos(5);
        SoloNode solo = null;
        try {
            solo = SoloNode.start(ringDirectory, violation);
            long killAt = System.nanoTime() + (end - System.nanoTime()) / 3;
            while (!stopping.getAsBoolean() && System.nanoTime() < end) {
                if (solo != null && System.nanoTime() > killAt) {
                    solo.killAndStartAgain(violation);
                    nodeKills.incrementAndGet();
                    killAt = Long.MAX_VALUE;
                }
                if (runsPrograms() && random.nextInt(4) == 0) {
                    program(cluster, random);
                } else {
                    application(cluster, random, violation);
                }
                sleep(200 + random.nextInt(800));
            }
        } catch (IOException | RuntimeException e) {
            violation.accept("the churn stopped: " + e);
        } finally {
            if (solo != null) {
                solo.stop(violation);
            }
        }
    }

    /**
     * Two applications on two nodes: one writes a pattern into the other's region, which must hold it
     * once the writes completed; then both end, politely or by dropping their connections. Failures
     * under the soak's faults (a cut, a restart) are counted, never a wrong byte after a completion.
     */
    private void application(EmbeddedCluster cluster, SplittableRandom random, Consumer<String> violation) {
        List<PagewireNode> nodes = cluster.nodes();
        PagewireNode a = nodes.get(random.nextInt(nodes.size()));
        PagewireNode b = nodes.get(random.nextInt(nodes.size()));
        RegistrationMode mode = MODES.get(random.nextInt(MODES.size()));
        applications.incrementAndGet();
        boolean drop = random.nextInt(3) == 0;
        ConnectOptions options = cluster.connectOptions().withDeadline(Duration.ofSeconds(20));
        try (Pagewire one = Pagewire.connect(a.target(), options); Pagewire two = Pagewire.connect(b.target(), options)) {
            Endpoint writer = one.openEndpoint("churn-writer");
            Endpoint owner = two.openEndpoint("churn-owner");
            byte[] data = new byte[APP_BYTES];
            random.nextBytes(data);
            long src = writer.allocate(APP_BYTES);
            writer.store(src, data);
            MemoryRegion from = writer.register(src, APP_BYTES, RegistrationMode.ON_DEMAND, Access.all());
            long dst = owner.allocate(APP_BYTES);
            MemoryRegion to = owner.register(dst, APP_BYTES, mode, Access.all());
            QueuePair qp = writer.connect(owner);
            for (int at = 0; at < APP_BYTES; at += 4096) {
                qp.await(qp.write(from, src + at, 4096, dst + at, to.rkey()));
            }
            byte[] landed = owner.load(dst, APP_BYTES);
            if (!Arrays.equals(landed, data)) {
                violation.accept("an application's " + APP_BYTES + " B of completed writes from " + a.id() + " to " + b.id() + " (" + mode
                        + ") are not in its region");
            }
            if (drop) {
                applicationsDropped.incrementAndGet(); // its sessions end with the connections, endpoints and all
            } else {
                qp.close();
                writer.close();
                owner.close();
            }
        } catch (RuntimeException underFaults) {
            applicationsFailed.incrementAndGet();
        }
    }

    /**
     * ibv_rc_pingpong between two nodes through the verbs library; one run in three is killed with
     * SIGKILL mid-run. Whatever happens (a node restarted under it, say), neither process outlives it.
     */
    private void program(EmbeddedCluster cluster, SplittableRandom random) throws IOException {
        List<PagewireNode> nodes = cluster.nodes();
        PagewireNode a = nodes.get(random.nextInt(nodes.size()));
        PagewireNode b = nodes.get((nodes.indexOf(a) + 1 + random.nextInt(nodes.size() - 1)) % nodes.size());
        int port = ExternalPrograms.freePort(7471);
        programs.incrementAndGet();
        String iterations = String.valueOf(50 + random.nextInt(200));
        Process server = null;
        Process client = null;
        try {
            server = start(a, pingpong, "-p", String.valueOf(port), "-n", iterations);
            sleep(300);
            client = start(b, pingpong, "-p", String.valueOf(port), "-n", iterations, "127.0.0.1");
            if (random.nextInt(3) == 0) {
                sleep(100 + random.nextInt(400));
                client.destroyForcibly();
                programsKilled.incrementAndGet();
            }
            boolean done = client.waitFor(30, TimeUnit.SECONDS) && server.waitFor(10, TimeUnit.SECONDS);
            if (done && client.exitValue() == 0 && server.exitValue() == 0) {
                programsCompleted.incrementAndGet();
            }
        } catch (RuntimeException underFaults) {
            // A node restarted as the programs were started (its target is gone): they end below.
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            for (Process p : new Process[] {client, server}) {
                if (p != null) {
                    p.destroyForcibly();
                }
            }
        }
    }

    private Process start(PagewireNode node, String... command) throws IOException {
        List<String> line = new ArrayList<>(List.of("nice", "-n", "10"));
        line.addAll(List.of(command));
        ProcessBuilder builder = new ProcessBuilder(line).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD);
        builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_"));
        builder.environment().put("LD_PRELOAD", library.toString());
        builder.environment().put("PAGEWIRE_NODE", node.target());
        builder.environment().put("PAGEWIRE_VERBS_RING_DIRECTORY", ringDirectory.toString());
        return builder.start();
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** A node process of the soak's own in its ring directory, with an application holding 16 MiB of its memory. */
    private static final class SoloNode {
        private static final long TOUCHED = 16L << 20;
        private final Path ringDirectory;
        private final int port;
        private final Path log;
        private Process process;
        private Path owner;

        private SoloNode(Path ringDirectory, int port, Path log) {
            this.ringDirectory = ringDirectory;
            this.port = port;
            this.log = log;
        }

        static SoloNode start(Path ringDirectory, Consumer<String> violation) throws IOException {
            Path log = Files.createTempFile("pagewire-soak-solo-", ".log");
            SoloNode node = new SoloNode(ringDirectory, ExternalPrograms.freePort(7472), log);
            node.launch(violation);
            return node;
        }

        private void launch(Consumer<String> violation) throws IOException {
            List<Path> before = owners();
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            ProcessBuilder builder = new ProcessBuilder(java, "-Xmx96m", "-cp", System.getProperty("java.class.path"), PagewireCommand.class.getName(),
                    "node", "--id", "soak-solo", "--host", "127.0.0.1", "--port", String.valueOf(port), "--metrics-port", "-1",
                    "--set", "pagewire.security.transport=plaintext", "--set", "pagewire.kernel.physicalMemoryBytes=64MiB",
                    "--set", "pagewire.quota.callerShare=1", "--set", "pagewire.node.ringDirectory=" + ringDirectory)
                    .redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
            builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_"));
            process = builder.start();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) {
                if (!process.isAlive()) {
                    violation.accept("the soak's own node process ended as it started: " + Files.readString(log));
                    return;
                }
                try (Pagewire connection = connect()) {
                    connection.node();
                    break;
                } catch (RuntimeException notYet) {
                    if (System.nanoTime() > deadline) {
                        violation.accept("the soak's own node process did not serve within 60 s");
                        return;
                    }
                    sleep(100);
                }
            }
            List<Path> mine = new ArrayList<>(owners());
            mine.removeAll(before);
            mine.removeIf(p -> !p.getFileName().toString().startsWith("pagewire-soak-solo-"));
            owner = mine.isEmpty() ? null : mine.get(0);
            try (Pagewire connection = connect()) {
                Endpoint endpoint = connection.openEndpoint("solo-toucher");
                long address = endpoint.allocate(TOUCHED);
                byte[] chunk = new byte[1 << 20];
                for (long at = 0; at < TOUCHED; at += chunk.length) {
                    Arrays.fill(chunk, (byte) (at >>> 20));
                    endpoint.store(address + at, chunk);
                }
            } catch (RuntimeException e) {
                violation.accept("an application could not fill 16 MiB of the soak's own node: " + e);
            }
        }

        private Pagewire connect() {
            // Over the stream: this JVM must not map the node's memory, or its pages would outlive the node.
            return Pagewire.connect("127.0.0.1:" + port, ConnectOptions.defaults().withSecurity(ClientSecurity.plaintext())
                    .withSharedMemory(false).withDeadline(Duration.ofSeconds(20)));
        }

        private List<Path> owners() throws IOException {
            try (Stream<Path> files = Files.list(ringDirectory)) {
                return files.filter(p -> p.getFileName().toString().endsWith(OwnerDirectory.SUFFIX)).toList();
            }
        }

        /** SIGKILL, then a new process: it must remove what the killed one left (its directory, 16 MiB of tmpfs). */
        void killAndStartAgain(Consumer<String> violation) throws IOException {
            Path left = owner;
            process.destroyForcibly();
            try {
                process.waitFor(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            if (left == null || !Files.isDirectory(left)) {
                violation.accept("the killed node process left no directory to find: " + left);
            }
            launch(violation);
            if (left != null && Files.exists(left)) {
                violation.accept("a node that started after one was killed left its directory " + left);
            }
        }

        void stop(Consumer<String> violation) {
            if (process == null) {
                return;
            }
            process.destroy();
            try {
                if (!process.waitFor(30, TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                    violation.accept("the soak's own node process did not stop within 30 s of SIGTERM");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            if (owner != null && Files.exists(owner)) {
                violation.accept("the soak's own node process stopped and left " + owner);
            }
            try {
                Files.deleteIfExists(log);
            } catch (IOException e) {
                // A temporary file.
            }
        }
    }
}
