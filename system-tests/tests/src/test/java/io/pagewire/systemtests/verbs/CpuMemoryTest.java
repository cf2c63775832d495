package io.pagewire.systemtests.verbs;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.KernelCounter;
import io.pagewire.node.PagewireNode;
import io.pagewire.ring.MemoryFile;
import io.pagewire.ring.PageTableFile;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Co-located applications as the node's CPUs: they map the node's memory and reach their pages
 * directly, fault pages in over their ring, watch their buffers for remote WRITEs, and leave the node
 * nothing held when they die in a copy; applications that do not map it get the same results by calls.
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class CpuMemoryTest extends SdkFixture {
    private static final int PAGE = 4096;

    private double kernelCount(PagewireNode node, KernelCounter counter) {
        return node.kernel().counters().get(counter);
    }

    @Test
    void aCoLocatedApplicationStoresAndLoadsItsPagesDirectlyAndFaultsThemInOverItsRing() {
        PagewireNode node = start(1, c -> { }).node(1);
        Endpoint endpoint = connect(node).openEndpoint("cpu");
        assertThat(endpoint.sharesMemory()).as("an application on the node's host maps its memory").isTrue();
        long address = endpoint.allocate(16 * PAGE);
        byte[] data = new byte[16 * PAGE - 100];
        new Random(7).nextBytes(data);
        double minorBefore = kernelCount(node, KernelCounter.CPU_FAULTS_MINOR);

        endpoint.store(address + 50, data);

        assertThat(kernelCount(node, KernelCounter.CPU_FAULTS_MINOR) - minorBefore).as("first touches: one CPU fault per page").isEqualTo(16);
        assertThat(endpoint.load(address + 50, data.length)).isEqualTo(data);
        // What the CPU stored is what the node's own (call) path and the NIC see: the same frames.
        assertThat(node.kernel().addressSpace(endpoint.id()).isResident((address >>> 12) + 3)).isTrue();
        byte[] viaNode = new byte[64];
        node.kernel().addressSpace(endpoint.id()).load(address + 50, viaNode, 0, 64);
        assertThat(viaNode).isEqualTo(java.util.Arrays.copyOf(data, 64));
        assertThat(kernelCount(node, KernelCounter.CPU_FAULTS_MINOR) - minorBefore).as("no fault once resident").isEqualTo(16);

        ByteBuffer bulk = ByteBuffer.allocateDirect(3 * PAGE);
        endpoint.load(address, bulk);
        assertThat(bulk.position()).isEqualTo(3 * PAGE);
        assertThat(bulk.get(50)).isEqualTo(data[0]);
    }

    @Test
    void pagesTheKernelTookComeBackThroughMajorCpuFaultsWithTheirBytes() {
        PagewireNode node = start(1, c -> { }).node(1);
        Endpoint endpoint = connect(node).openEndpoint("cpu");
        long address = endpoint.allocate(16 * PAGE);
        byte[] data = new byte[16 * PAGE];
        new Random(11).nextBytes(data);
        endpoint.store(address, data);
        assertThat(endpoint.pageOut(address, data.length)).isEqualTo(16);
        double majorBefore = kernelCount(node, KernelCounter.CPU_FAULTS_MAJOR);

        assertThat(endpoint.load(address, data.length)).isEqualTo(data);

        assertThat(kernelCount(node, KernelCounter.CPU_FAULTS_MAJOR) - majorBefore).as("swapped pages read back").isEqualTo(16);
    }

    /**
     * Two applications whose pages together are twice the node's frames store into and load from them
     * while reclaim takes frames away under their copies: every load returns what its own page last
     * got, so no copy ever went to a frame that had moved on to another page.
     */
    @Test
    void copiesRacingWithReclaimNeverReachAnotherPagesFrame() throws Exception {
        PagewireNode node = start(1, c -> c.kernel().physicalMemoryBytes(1L << 20).swapBytes(16L << 20)).node(1);
        Pagewire connection = connect(node);
        int pages = 256; // each: the node has 256 frames for both
        int rounds = 12;
        List<CompletableFuture<Void>> writers = new ArrayList<>();
        for (int w = 0; w < 2; w++) {
            Endpoint endpoint = connection.openEndpoint("writer-" + w);
            assertThat(endpoint.sharesMemory()).isTrue();
            long base = endpoint.allocate((long) pages * PAGE);
            int writer = w;
            writers.add(CompletableFuture.runAsync(() -> {
                byte[] page = new byte[PAGE];
                for (int round = 0; round < rounds; round++) {
                    for (int p = 0; p < pages; p++) {
                        java.util.Arrays.fill(page, (byte) (writer * 100 + p + round));
                        endpoint.store(base + (long) p * PAGE, page);
                        endpoint.storeLong(base + (long) p * PAGE + 8, ((long) writer << 48) | ((long) p << 16) | round);
                        int q = (p * 7) % pages; // one written earlier this round, or last round
                        int expectedRound = q <= p ? round : round - 1;
                        if (expectedRound >= 0) {
                            byte[] back = endpoint.load(base + (long) q * PAGE, PAGE);
                            long word = endpoint.loadLong(base + (long) q * PAGE + 8);
                            assertThat(word).as("writer %d page %d round %d", writer, q, expectedRound)
                                    .isEqualTo(((long) writer << 48) | ((long) q << 16) | expectedRound);
                            assertThat(back[0]).isEqualTo((byte) (writer * 100 + q + expectedRound));
                            assertThat(back[PAGE - 1]).isEqualTo((byte) (writer * 100 + q + expectedRound));
                        }
                    }
                }
            }));
        }
        for (CompletableFuture<Void> writer : writers) {
            writer.get(90, TimeUnit.SECONDS);
        }
        assertThat(kernelCount(node, KernelCounter.EVICTIONS)).as("reclaim ran under the copies").isGreaterThan(2 * pages);
        assertThat(kernelCount(node, KernelCounter.CPU_FAULTS_MAJOR)).as("pages came back from swap").isGreaterThan(pages);
    }

    @Test
    void wordAtomicsOfTheCpuAndTheNicOnOneWordAddUp() throws Exception {
        start(2, c -> { });
        Endpoint a = connect(cluster.node(1)).openEndpoint("a");
        Endpoint b = connect(cluster.node(2)).openEndpoint("b");
        long word = b.allocate(PAGE);
        assertThat(b.compareAndSwapLong(word, 0, 5)).isZero();
        assertThat(b.compareAndSwapLong(word, 0, 9)).as("a failed swap returns what is there").isEqualTo(5);
        MemoryRegion target = b.register(word, PAGE, RegistrationMode.PINNED, EnumSet.of(Access.REMOTE_ATOMIC, Access.REMOTE_WRITE, Access.LOCAL_WRITE));
        QueuePair qp = a.connect(b);
        int each = 300;
        CompletableFuture<Void> cpu = CompletableFuture.runAsync(() -> {
            for (int i = 0; i < each; i++) {
                b.fetchAddLong(word, 1);
            }
        });
        for (int i = 0; i < each; i++) {
            qp.await(qp.fetchAdd(word, target.rkey(), 1));
        }
        cpu.get(60, TimeUnit.SECONDS);
        assertThat(b.loadLong(word)).as("5 + CPU's and NIC's adds, none lost").isEqualTo(5 + 2L * each);
    }

    /** The receiver of a WRITE sees it by watching its buffer, spinning (busy-poll) or asleep until the node's bell. */
    @ParameterizedTest
    @ValueSource(booleans = {true, false})
    void aReceiverSeesAWriteByWatchingItsBuffer(boolean busyPoll) throws Exception {
        start(2, c -> { });
        Pagewire toB = track(Pagewire.connect(cluster.node(2).target(), connectOptions().withBusyPoll(busyPoll)));
        Endpoint a = connect(cluster.node(1)).openEndpoint("a");
        Endpoint b = toB.openEndpoint("b");
        long buffer = b.allocate(PAGE);
        b.storeLong(buffer + 64, 0);
        MemoryRegion remote = b.register(buffer, PAGE, RegistrationMode.PINNED, EnumSet.of(Access.REMOTE_WRITE, Access.LOCAL_WRITE));
        long source = a.allocate(PAGE);
        MemoryRegion local = a.register(source, PAGE, RegistrationMode.PINNED, EnumSet.of(Access.LOCAL_WRITE));
        QueuePair qp = a.connect(b);
        for (long round = 1; round <= 20; round++) {
            long previous = round - 1;
            CompletableFuture<Long> seen = CompletableFuture.supplyAsync(() -> b.awaitChange(buffer + 64, previous, Duration.ofSeconds(20)));
            if (!busyPoll) {
                Thread.sleep(round == 1 ? 50 : 2); // let the watcher fall asleep: the node's bell must wake it
            }
            a.storeLong(source, round);
            qp.await(qp.write(local, source, 8, buffer + 64, remote.rkey()));
            assertThat(seen.get(30, TimeUnit.SECONDS)).as("round " + round).isEqualTo(round);
        }
        assertThat(b.awaitChange(buffer + 64, 20, Duration.ofMillis(20))).as("a wait that times out returns the value it waited on").isEqualTo(20);
    }

    @Test
    void aBadAddressFailsOnlyThatAccessAndTheNodeServesEveryoneElse() {
        PagewireNode node = start(1, c -> { }).node(1);
        Pagewire connection = connect(node);
        Endpoint broken = connection.openEndpoint("broken");
        long address = broken.allocate(PAGE);
        assertThatThrownBy(() -> broken.store(address + 2 * PAGE, new byte[8])).isInstanceOf(PagewireException.InvalidRequestException.class)
                .hasMessageContaining("not allocated");
        assertThatThrownBy(() -> broken.loadLong(address + 3)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("aligned");
        broken.storeLong(address, 42);
        Endpoint other = connection.openEndpoint("other");
        long page = other.allocate(PAGE);
        other.storeLong(page, 7);
        assertThat(other.loadLong(page)).isEqualTo(7);
        assertThat(broken.loadLong(address)).as("the broken one still works where its memory is").isEqualTo(42);
    }

    @Test
    void aGuardLeftByAProcessKilledInACopyIsTakenBackWhenItsSessionEnds() throws Exception {
        PagewireNode node = start(1, c -> { }).node(1);
        Pagewire connection = connect(node);
        Endpoint endpoint = connection.openEndpoint("killed");
        long address = endpoint.allocate(PAGE);
        endpoint.storeLong(address, 1);
        AddressSpace space = node.kernel().addressSpace(endpoint.id());
        assertThat(Files.getPosixFilePermissions(space.cpuPageTable())).as("the page table is read-only outside the node")
                .isEqualTo(Set.of(PosixFilePermission.OWNER_READ));
        MemoryFile memory = MemoryFile.open(node.kernel().memory().path());
        int frame = PageTableFile.frameOf(PageTableFile.open(space.cpuPageTable()).entry(address >>> 12));
        // What a process killed in the middle of a store leaves: its slot in the frame's guard.
        assertThat(memory.acquireGuard(frame, space.cpuSlot())).isTrue();
        double takenBefore = kernelCount(node, KernelCounter.CPU_GUARDS_TAKEN_BACK);
        assertThat(endpoint.pageOut(address, PAGE)).as("reclaim leaves a guarded frame alone").isZero();

        connection.close(); // the session ends; the fixture then checks every frame came back

        awaitTrue(() -> node.kernel().stats().residentPages() == 0, 10_000, "the frame is free again");
        assertThat(kernelCount(node, KernelCounter.CPU_GUARDS_TAKEN_BACK) - takenBefore).isEqualTo(1);
        assertThat(MemoryFile.guardSlot(memory.guard(frame))).isZero();
    }

    @Test
    void aGuardWordNamingNoSessionIsNotHonoured() throws Exception {
        PagewireNode node = start(1, c -> { }).node(1);
        Endpoint endpoint = connect(node).openEndpoint("scribbled");
        long address = endpoint.allocate(PAGE);
        endpoint.storeLong(address, 3);
        AddressSpace space = node.kernel().addressSpace(endpoint.id());
        MemoryFile memory = MemoryFile.open(node.kernel().memory().path());
        int frame = PageTableFile.frameOf(PageTableFile.open(space.cpuPageTable()).entry(address >>> 12));
        assertThat(memory.compareAndSetGuard(frame, memory.guard(frame), 4242)).isTrue(); // a stray write of a broken application

        assertThat(endpoint.pageOut(address, PAGE)).as("the scribbled guard is cleared, the page goes").isEqualTo(1);
        assertThat(endpoint.loadLong(address)).isEqualTo(3);
    }

    @Test
    void withoutSharedMemoryTheSameAccessesAreCallsWithTheSameResults() {
        PagewireNode node = start(1, c -> { }).node(1);
        Endpoint endpoint = track(Pagewire.connect(node.target(), connectOptions().withSharedMemory(false))).openEndpoint("remote");
        assertThat(endpoint.sharesMemory()).isFalse();
        long address = endpoint.allocate(2 * PAGE);
        endpoint.storeLong(address + 8, 10);
        assertThat(endpoint.fetchAddLong(address + 8, 5)).isEqualTo(10);
        assertThat(endpoint.compareAndSwapLong(address + 8, 15, 1)).isEqualTo(15);
        assertThat(endpoint.loadLong(address + 8)).isEqualTo(1);
        ByteBuffer src = ByteBuffer.wrap(new byte[] {1, 2, 3});
        endpoint.store(address + PAGE - 1, src);
        assertThat(src.hasRemaining()).isFalse();
        assertThat(endpoint.load(address + PAGE - 1, 3)).containsExactly(1, 2, 3);
        assertThat(endpoint.awaitChange(address + 8, 1, Duration.ofMillis(30))).isEqualTo(1);
    }
}
