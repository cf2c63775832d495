package io.pagewire.systemtests;

import static io.pagewire.node.TestData.crc;
import static io.pagewire.node.TestData.pattern;
import static io.pagewire.systemtests.ClusterChecks.total;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The node-level memory pressure suite through the SDK: a working set four times the responder's
 * physical memory is written and read back intact in the three modes that do not pin the whole
 * region (the responder really pages, its NIC is told of evictions), and a PINNED registration of
 * the same working set is refused with the memlock error, pinning nothing.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
abstract class MemoryPressureSuite {
    private static final long NODE_MEMORY = 4L << 20;
    private static final long WORKING_SET = 4 * NODE_MEMORY;
    private static final int CHUNK = 64 << 10;
    private static final int SOURCES = 4;

    /** Nodes of 4 MiB with a 2 MiB memlock limit and a small TLB. */
    static ClusterSpec spec() {
        return ClusterSpec.nodes(2).set("pagewire.kernel.physicalMemoryBytes", "4MiB").set("pagewire.kernel.swapBytes", "64MiB")
                .set("pagewire.kernel.memlockLimitBytes", "2MiB").set("pagewire.nic.tlbEntries", "64").set("pagewire.nic.tlbWays", "4")
                .set("pagewire.nic.ackTimeoutNs", "50ms");
    }

    @ParameterizedTest
    @EnumSource(value = RegistrationMode.class, names = {"PIN_ON_MISS", "SHADOW", "ON_DEMAND"})
    void aWorkingSetFourTimesMemoryIsWrittenAndReadBackIntact(RegistrationMode mode, PagewireCluster cluster) {
        Pagewire responder = cluster.node(2).connect();
        Endpoint local = cluster.node(1).connect().openEndpoint("pressure-" + mode);
        Endpoint remote = responder.openEndpoint("pressure-" + mode);
        double swapOutsBefore = total(responder, "pagewire_swap_outs_pages_total");
        double invalidationsBefore = total(responder, "pagewire_kernel_invalidations_pages_total");
        long dst = remote.allocate(WORKING_SET);
        MemoryRegion dstRegion = remote.register(dst, WORKING_SET, mode, Access.all());
        List<MemoryRegion> sources = new ArrayList<>();
        for (int i = 0; i < SOURCES; i++) {
            long src = local.allocate(CHUNK);
            sources.add(local.register(src, CHUNK, mode, Access.all()));
        }
        QueuePair qp = local.connect(remote);
        int chunks = (int) (WORKING_SET / CHUNK);
        List<CompletableFuture<Completion>> inFlight = new ArrayList<>();
        for (int i = 0; i < chunks; i++) {
            if (i >= SOURCES) {
                qp.await(inFlight.get(i - SOURCES));
            }
            MemoryRegion src = sources.get(i % SOURCES);
            local.store(src.address(), pattern(i, CHUNK));
            inFlight.add(qp.write(src, src.address(), CHUNK, dst + (long) i * CHUNK, dstRegion.rkey()));
        }
        for (int i = chunks - SOURCES; i < chunks; i++) {
            qp.await(inFlight.get(i));
        }
        assertThat(total(responder, "pagewire_swap_outs_pages_total") - swapOutsBefore).as("the responder really paged").isPositive();
        assertThat(total(responder, "pagewire_kernel_invalidations_pages_total") - invalidationsBefore)
                .as("the NIC was told of evictions").isPositive();
        if (mode == RegistrationMode.SHADOW) {
            // The shadow table mirrors every resident page, so every eviction drops an entry. (A small
            // TLB has usually replaced an entry long before the kernel evicts its page.)
            assertThat(total(responder, "pagewire_nic_invalidated_translations_total")).as("evictions dropped shadow table entries").isPositive();
        }

        // Every chunk, read on the responder by its CPU (faulting pages back in from swap).
        for (int i = 0; i < chunks; i++) {
            assertThat(crc(remote.load(dst + (long) i * CHUNK, CHUNK))).as("%s chunk %d", mode, i).isEqualTo(crc(pattern(i, CHUNK)));
        }
        // A sample read back over the fabric, through the responder's mode.
        long back = local.allocate(CHUNK);
        MemoryRegion backRegion = local.register(back, CHUNK, mode, Access.all());
        for (int i = 0; i < chunks; i += 37) {
            qp.await(qp.read(backRegion, back, CHUNK, dst + (long) i * CHUNK, dstRegion.rkey()));
            assertThat(crc(local.load(back, CHUNK))).as("%s chunk %d read back", mode, i).isEqualTo(crc(pattern(i, CHUNK)));
        }
        qp.close();
        local.close();
        remote.close();
    }

    @Test
    void pinnedRegistrationOfTheSameWorkingSetFailsWithTheMemlockError(PagewireCluster cluster) {
        Pagewire responder = cluster.node(2).connect();
        Endpoint remote = responder.openEndpoint("pinned-too-much");
        long dst = remote.allocate(WORKING_SET);
        assertThatThrownBy(() -> remote.register(dst, WORKING_SET, RegistrationMode.PINNED, Access.all()))
                .isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageContaining("memlock limit 2 MiB exceeded: endpoint " + remote.id() + " would pin 16 MiB");
        assertThat(total(responder, "pagewire_memory_pages", "state=pinned")).as("a refused registration pins nothing").isZero();
        remote.close();
    }
}
