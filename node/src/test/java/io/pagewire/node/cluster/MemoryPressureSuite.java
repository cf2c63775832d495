package io.pagewire.node.cluster;

import static io.pagewire.node.TestData.pattern;
import static io.pagewire.node.TestData.crc;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelCounter;
import io.pagewire.kernel.PinLimitExceededException;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * A working set four times the responder's physical memory: the three modes that do not pin the
 * whole region complete a write workload and every byte reads back; PINNED registration of the same
 * working set fails with the memlock error.
 */
abstract class MemoryPressureSuite extends ClusterFixture {
    private static final long RESPONDER_MEMORY = 4L << 20;
    private static final long WORKING_SET = 4 * RESPONDER_MEMORY;
    private static final int CHUNK = 64 << 10;
    private static final int SOURCES = 4;

    private void startPressuredCluster() {
        start(2, context -> {
            if (context.nodeId().equals("node-2")) {
                context.kernel().physicalMemoryBytes(RESPONDER_MEMORY).swapBytes(64L << 20).memlockLimitBytes(2L << 20);
                context.nic().tlbEntries(64).tlbWays(4);
            }
        });
    }

    @ParameterizedTest
    @EnumSource(value = RegistrationMode.class, names = {"PIN_ON_MISS", "SHADOW", "ON_DEMAND"})
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aWorkingSetFourTimesMemoryIsWrittenAndReadBackIntact(RegistrationMode mode) throws Exception {
        startPressuredCluster();
        PagewireNode responder = cluster.node(2);
        Connection c = connect(cluster.node(1), responder);
        long dst = c.remote().space().allocate(WORKING_SET);
        MemoryRegion dstRegion = c.remote().register(dst, WORKING_SET, mode, Access.all());
        List<MemoryRegion> sources = new ArrayList<>();
        for (int i = 0; i < SOURCES; i++) {
            long src = c.local().space().allocate(CHUNK);
            sources.add(c.local().register(src, CHUNK, mode, Access.all()));
        }
        int chunks = (int) (WORKING_SET / CHUNK);
        for (int i = 0; i < chunks; i++) {
            if (i >= SOURCES) {
                awaitSuccess(c.cq());
            }
            MemoryRegion src = sources.get(i % SOURCES);
            c.local().space().store(src.address(), pattern(i, CHUNK), 0, CHUNK);
            c.qp().post(WorkRequest.write(i, src.lkey(), src.address(), CHUNK, dst + (long) i * CHUNK, dstRegion.rkey()));
        }
        for (int i = 0; i < SOURCES; i++) {
            awaitSuccess(c.cq());
        }
        assertThat(responder.kernel().counters().get(KernelCounter.SWAP_OUTS)).as("the responder really paged").isPositive();
        assertThat(responder.kernel().counters().get(KernelCounter.INVALIDATIONS)).as("listeners were told of evictions").isPositive();
        if (mode == RegistrationMode.SHADOW) {
            // The shadow table mirrors every resident page, so every eviction drops an entry. (A small
            // TLB has usually replaced an entry long before the kernel evicts its page.)
            assertThat(responder.nic().counters().get(NicCounter.INVALIDATED_TRANSLATIONS))
                    .as("evictions dropped shadow table entries").isPositive();
        }

        // Every chunk, read on the responder by its CPU (faulting pages back in from swap).
        for (int i = 0; i < chunks; i++) {
            byte[] landed = new byte[CHUNK];
            c.remote().space().load(dst + (long) i * CHUNK, landed, 0, CHUNK);
            assertThat(crc(landed)).as("%s chunk %d", mode, i).isEqualTo(crc(pattern(i, CHUNK)));
        }
        // A sample read back over the fabric, through the responder's mode.
        long back = c.local().space().allocate(CHUNK);
        MemoryRegion backRegion = c.local().register(back, CHUNK, mode, Access.all());
        for (int i = 0; i < chunks; i += 37) {
            c.qp().post(WorkRequest.read(10_000 + i, backRegion.lkey(), back, CHUNK, dst + (long) i * CHUNK, dstRegion.rkey()));
            awaitSuccess(c.cq());
            byte[] read = new byte[CHUNK];
            c.local().space().load(back, read, 0, CHUNK);
            assertThat(crc(read)).as("%s chunk %d read back", mode, i).isEqualTo(crc(pattern(i, CHUNK)));
        }
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void pinnedRegistrationOfTheSameWorkingSetFailsWithTheMemlockError() {
        startPressuredCluster();
        Connection c = connect(cluster.node(1), cluster.node(2));
        long dst = c.remote().space().allocate(WORKING_SET);
        assertThatThrownBy(() -> c.remote().register(dst, WORKING_SET, RegistrationMode.PINNED, Access.all()))
                .isInstanceOf(PinLimitExceededException.class)
                .hasMessageStartingWith("memlock limit 2 MiB exceeded: endpoint " + c.remote().id() + " would pin 16 MiB");
        assertThat(cluster.node(2).kernel().stats().pinnedPages()).as("a refused registration pins nothing").isZero();
    }
}
