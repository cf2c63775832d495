package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Pages a CPU maps in its own page tables (the C verbs library): reserved at the program's addresses,
 * held until reclaim asks for them and the CPU lets go, discarded as MADV_DONTNEED discards, and bad
 * ranges refused.
 */
class CpuMappingTest {
    private final KernelAgent kernel = TestKernels.start(16, 64);
    private final AddressSpace space = kernel.createAddressSpace();
    private final List<Long> unmapsWanted = new ArrayList<>();

    CpuMappingTest() {
        space.addListener(new MemoryListener() {
            @Override
            public void invalidate(AddressSpace s, long firstVpn, long pageCount, InvalidationReason reason) {
            }

            @Override
            public void cpuUnmapWanted(AddressSpace s, long vpn) {
                unmapsWanted.add(vpn);
            }
        });
    }

    @AfterEach
    void close() {
        space.close();
        TestKernels.assertNothingHeld(kernel);
        kernel.close();
    }

    @Test
    void reservationsAtAProgramsAddressesJoinAndARangeFreesExactlyItsPages() {
        long at = 0x7f00_0000_0000L;
        assertThat(space.allocateAt(at, 4 * PAGE)).isEqualTo(4 * PAGE);
        assertThat(space.allocateAt(at + 2 * PAGE, 4 * PAGE)).as("only the pages not reserved yet count").isEqualTo(2 * PAGE);
        assertThat(space.isAllocated(at, 6 * PAGE)).as("overlapping reservations are one allocation").isTrue();
        space.freeRange(at + 2 * PAGE, 2 * PAGE);
        assertThat(space.isAllocated(at, 2 * PAGE)).isTrue();
        assertThat(space.isAllocated(at + 4 * PAGE, 2 * PAGE)).isTrue();
        assertThat(space.isAllocated(at + 2 * PAGE, PAGE)).isFalse();
        assertThat(space.allocatedBytes()).isEqualTo(4 * PAGE);
        space.freeRange(at, 6 * PAGE);
        assertThat(space.allocatedBytes()).isZero();
    }

    @Test
    void reclaimAsksTheCpuForAMappedPageAndTakesItOnlyOnceReleased() {
        long at = 0x7f00_0000_0000L;
        space.allocateAt(at, 16 * PAGE);
        int[] frames = space.holdForCpu(at, 16 * PAGE);
        assertThat(frames).hasSize(16).doesNotHaveDuplicates();
        long other = space.allocate(PAGE);
        assertThatThrownBy(() -> space.touch(other, true)).as("every frame is mapped by the CPU").isInstanceOf(MemoryExhaustedException.class);
        assertThat(unmapsWanted).as("reclaim asked the CPU for pages back").isNotEmpty();
        assertThat(kernel.counters().get(KernelCounter.CPU_UNMAPS_REQUESTED)).isEqualTo(unmapsWanted.size());
        long vpn = unmapsWanted.get(0);
        space.releaseForCpu(vpn * PAGE, PAGE);
        space.touch(other, true);
        assertThat(space.isResident(vpn)).as("the released page gave its frame").isFalse();
        assertThat(space.holdForCpu(vpn * PAGE, PAGE)).as("mapped again, from swap").hasSize(1);
        assertThat(kernel.counters().get(KernelCounter.CPU_FAULTS_MAJOR)).isEqualTo(1);
    }

    @Test
    void discardDropsThePagesAndTheNextTouchFindsZeros() {
        long at = 0x7f00_0000_0000L;
        space.allocateAt(at, 2 * PAGE);
        space.store(at, new byte[] {7, 7, 7}, 0, 3);
        space.discard(at, 2 * PAGE);
        assertThat(space.residentPages()).isZero();
        byte[] back = new byte[3];
        space.load(at, back, 0, 3);
        assertThat(back).containsOnly(0);
        space.pinRange(at, PAGE);
        assertThatThrownBy(() -> space.discard(at, PAGE)).as("a pinned page stays").isInstanceOf(KernelException.class);
        space.unpinRange(at, PAGE);
    }

    @Test
    void badRangesAreRefusedWithTheirReason() {
        assertThatThrownBy(() -> space.holdForCpu(-4096, 1L << 60)).isInstanceOf(BadAddressException.class).hasMessageContaining("below");
        assertThatThrownBy(() -> space.releaseForCpu(0x1000, -1)).isInstanceOf(BadAddressException.class);
        assertThatThrownBy(() -> space.discard(Long.MAX_VALUE - 10, 4096)).isInstanceOf(BadAddressException.class);
        assertThatThrownBy(() -> space.holdForCpu(0x7f00_0000_0000L, PAGE)).as("not reserved").isInstanceOf(BadAddressException.class);
        assertThatThrownBy(() -> space.allocateAt(123, PAGE)).isInstanceOf(BadAddressException.class);
        assertThatThrownBy(() -> space.freeRange(0x1000, 0)).isInstanceOf(BadAddressException.class);
    }
}
