package io.pagewire.systemtests;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.netty.shaded.io.netty.util.concurrent.EventExecutor;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.time.Instant;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The health check that starts no JVM: a node rewrites its health file every interval and the image's
 * probe script ({@code deploy/docker/pagewire-health}) reads it. Healthy while the node serves; unhealthy
 * within three intervals when its event loop is stuck, while its port is closed for a shutdown that
 * drains, once it stopped, and when the file grows old (a node frozen whole).
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class NodeHealthFileTest {
    private static final Path PROBE = Path.of(System.getProperty("pagewire.repository.root", "../.."), "deploy/docker/pagewire-health");
    private static final long INTERVAL_NS = 200_000_000L;

    @TempDir
    Path directory;

    @Test
    void aServingNodeIsHealthyAndAStuckLoopAClosedPortOrAStoppedNodeIsNot() throws Exception {
        Path file = directory.resolve("health");
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.nic().ackTimeoutNs(2_000_000_000L);
            if (c.nodeId().equals("node-1")) {
                c.healthFile(file).healthIntervalNs(INTERVAL_NS).shutdownGraceNs(30_000_000_000L);
            }
        })) {
            PagewireNode node = cluster.node(1);
            awaitTrue(() -> Files.exists(file), 5_000, "the node wrote its health file");
            assertThat(Files.readString(file)).startsWith("SERVING node-1 ");
            assertThat(probe(file)).as("the probe of a serving node").isEqualTo("healthy");

            // A stuck event loop: the node says so within three intervals (plus the one that writes it).
            CountDownLatch release = new CountDownLatch(1);
            for (EventExecutor loop : node.eventLoops().workers()) {
                loop.execute(() -> {
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                });
            }
            long stuckAt = System.nanoTime();
            awaitTrue(() -> probe(file).startsWith("unhealthy"), 10_000, "the probe sees the stuck loop");
            long tookNs = System.nanoTime() - stuckAt;
            assertThat(Files.readString(file)).contains("NOT_SERVING", "event loop 1 of 1 has not run for");
            assertThat(tookNs).as("ns until a stuck loop was reported").isLessThan(5 * INTERVAL_NS + 1_000_000_000L);
            release.countDown();
            awaitTrue(() -> probe(file).equals("healthy"), 10_000, "healthy again once the loop runs");

            // A graceful shutdown closes the port at once and drains for up to its grace: unhealthy all along.
            Endpoint writer = node.nic().openEndpoint("outstanding");
            Endpoint target = cluster.node(2).nic().openEndpoint("target");
            long src = writer.space().allocate(4096);
            long dst = target.space().allocate(4096);
            MemoryRegion from = writer.register(src, 4096, RegistrationMode.PINNED, Access.all());
            MemoryRegion to = target.register(dst, 4096, RegistrationMode.PINNED, Access.all());
            CompletionQueue cq = node.nic().createCompletionQueue();
            QueuePair qp = node.nic().createQueuePair(writer, cq);
            QueuePair remote = cluster.node(2).nic().createQueuePair(target, cluster.node(2).nic().createCompletionQueue());
            qp.connect(remote.address());
            remote.connect(qp.address());
            node.fabric().cut("node-2");
            qp.post(WorkRequest.write(1, from.lkey(), src, 4096, dst, to.rkey())); // outstanding while the link is cut
            int port = Integer.parseInt(node.target().substring(node.target().lastIndexOf(':') + 1));
            CompletableFuture<Boolean> drained = CompletableFuture.supplyAsync(node::shutdownGracefully);
            awaitTrue(() -> probe(file).startsWith("unhealthy"), 10_000, "the probe sees the shutdown");
            assertThat(Files.readString(file)).contains("NOT_SERVING", "the server is shut down");
            assertThat(portAccepts(port)).as("the port is closed").isFalse();
            assertThat(drained).as("still draining").isNotDone();
            node.fabric().heal("node-2");
            drained.get(60, TimeUnit.SECONDS);
            assertThat(Files.readString(file)).as("a stopped node").contains("NOT_SERVING", "stopped");
            assertThat(probe(file)).startsWith("unhealthy");
        }
    }

    @Test
    void aFileThatStoppedBeingRewrittenIsUnhealthyAndAMissingOneToo() throws Exception {
        Path file = directory.resolve("health");
        assertThat(probe(file)).startsWith("unhealthy").contains("does not exist");
        Files.writeString(file, "SERVING node-1 " + System.currentTimeMillis() + "\n");
        assertThat(probe(file)).isEqualTo("healthy");
        Files.setLastModifiedTime(file, FileTime.from(Instant.now().minusSeconds(6)));
        assertThat(probe(file)).as("a node frozen whole writes nothing").startsWith("unhealthy").contains("older than 5 s");
    }

    /** "healthy", or "unhealthy: " and what the probe printed. */
    private static String probe(Path file) {
        try {
            ProcessBuilder builder = new ProcessBuilder("/bin/sh", PROBE.toString()).redirectErrorStream(true);
            builder.environment().put("PAGEWIRE_NODE_HEALTH_FILE", file.toString());
            Process probe = builder.start();
            String out = new String(probe.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            assertThat(probe.waitFor(10, TimeUnit.SECONDS)).isTrue();
            return probe.exitValue() == 0 ? "healthy" : "unhealthy: " + out;
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    private static boolean portAccepts(int port) {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress("127.0.0.1", port), 1_000);
            return true;
        } catch (IOException refused) {
            return false;
        }
    }
}
