package io.pagewire.systemtests;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import io.pagewire.testkit.PagewireClusterExtension;
import java.util.Arrays;
import java.util.BitSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * What only separate machines show, with each node in its own container: a node killed in the
 * middle of a workload. Requests to it end with a clear error in bounded time, traffic among the
 * other nodes goes on, nothing acknowledged is lost; restarted, it is linked again and takes writes.
 */
class NodeFailureContainerIT {
    private static final int CHUNK = 16 * 1024;
    private static final int CHUNKS = 2048;

    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(ClusterSpec.nodes(3).backend(ClusterBackend.CONTAINERS)
            .set("pagewire.kernel.physicalMemoryBytes", "96MiB")
            .set("pagewire.nic.ackTimeoutNs", "200ms").set("pagewire.nic.retryCount", "5"));

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void aKilledNodeFailsOnlyWhatGoesToItAndComesBackAfterARestart(PagewireCluster cluster) throws Exception {
        Endpoint writer = cluster.node(2).connect().openEndpoint("writer");
        Endpoint survivor = cluster.node(3).connect().openEndpoint("survivor");
        Endpoint victim = cluster.node(1).connect().openEndpoint("victim");
        long src = writer.allocate(CHUNK);
        MemoryRegion srcRegion = writer.register(src, CHUNK, RegistrationMode.PINNED, Access.all());
        long survivorDst = survivor.allocate((long) CHUNK * CHUNKS);
        MemoryRegion survivorRegion = survivor.register(survivorDst, (long) CHUNK * CHUNKS, RegistrationMode.ON_DEMAND, Access.all());
        long victimDst = victim.allocate(CHUNK);
        MemoryRegion victimRegion = victim.register(victimDst, CHUNK, RegistrationMode.ON_DEMAND, Access.all());
        QueuePair toSurvivor = writer.connect(survivor);
        QueuePair toVictim = writer.connect(victim);
        toVictim.await(toVictim.write(srcRegion, src, CHUNK, victimDst, victimRegion.rkey()));

        // The workload: chunk i carries byte value i, written to its own place on node-3, one at a time.
        BitSet acknowledged = new BitSet(CHUNKS);
        AtomicInteger afterKill = new AtomicInteger();
        AtomicBoolean killed = new AtomicBoolean();
        CompletableFuture<Void> workload = CompletableFuture.runAsync(() -> {
            byte[] chunk = new byte[CHUNK];
            for (int i = 0; i < CHUNKS && !(killed.get() && afterKill.get() >= 200); i++) {
                Arrays.fill(chunk, (byte) i);
                writer.store(src, chunk);
                toSurvivor.await(toSurvivor.write(srcRegion, src, CHUNK, survivorDst + (long) i * CHUNK, survivorRegion.rkey()));
                synchronized (acknowledged) {
                    acknowledged.set(i);
                }
                if (killed.get()) {
                    afterKill.incrementAndGet();
                }
            }
        });
        awaitUntil(() -> {
            synchronized (acknowledged) {
                return acknowledged.cardinality() >= 100;
            }
        }, 60, "the workload got going");

        cluster.node(1).kill();
        killed.set(true);
        long start = System.nanoTime();
        assertThatThrownBy(() -> toVictim.await(toVictim.write(srcRegion, src, CHUNK, victimDst, victimRegion.rkey())))
                .as("a write to the killed node fails").isInstanceOf(PagewireException.class)
                .satisfies(e -> System.out.println("write to the killed node: " + e));
        double seconds = (System.nanoTime() - start) / 1e9;
        System.out.printf("the write to the killed node failed after %.2f s%n", seconds);
        assertThat(seconds).as("the failure came within the retry budget").isLessThan(30);

        workload.get(120, TimeUnit.SECONDS);
        assertThat(afterKill.get()).as("writes between the surviving nodes went on after the kill").isGreaterThanOrEqualTo(200);
        for (int i = acknowledged.nextSetBit(0); i >= 0; i = acknowledged.nextSetBit(i + 1)) {
            byte[] expected = new byte[CHUNK];
            Arrays.fill(expected, (byte) i);
            assertThat(survivor.load(survivorDst + (long) i * CHUNK, CHUNK)).as("acknowledged chunk %d", i).isEqualTo(expected);
        }
        System.out.printf("%d chunks acknowledged, %d after the kill, every one intact%n", acknowledged.cardinality(), afterKill.get());

        cluster.node(1).restart();
        Endpoint reborn = cluster.node(1).connect().openEndpoint("reborn");
        long rebornDst = reborn.allocate(CHUNK);
        MemoryRegion rebornRegion = reborn.register(rebornDst, CHUNK, RegistrationMode.PIN_ON_MISS, Access.all());
        byte[] hello = new byte[CHUNK];
        Arrays.fill(hello, (byte) 0x5A);
        writer.store(src, hello);
        QueuePair again = writer.connect(reborn);
        again.await(again.write(srcRegion, src, CHUNK, rebornDst, rebornRegion.rkey()));
        assertThat(reborn.load(rebornDst, CHUNK)).as("a write to the restarted node lands").isEqualTo(hello);
    }

    private static void awaitUntil(BooleanSupplier condition, int seconds, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + seconds + " s waiting until " + what);
            }
            Thread.sleep(20);
        }
    }
}
