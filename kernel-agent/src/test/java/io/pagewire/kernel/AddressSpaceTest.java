package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class AddressSpaceTest {
    private final KernelAgent kernel = TestKernels.start(32, 64);
    private final AddressSpace space = kernel.createAddressSpace();

    @AfterEach
    void close() {
        space.close();
        TestKernels.assertNothingHeld(kernel);
        kernel.close();
    }

    @Test
    void allocationReservesPageAlignedSpaceWithoutFrames() {
        long a = space.allocate(10);
        long b = space.allocate(3 * PAGE);
        assertThat(a % PAGE).isZero();
        assertThat(a).isGreaterThanOrEqualTo(AddressSpace.FIRST_ADDRESS);
        assertThat(b).as("one guard page between allocations").isEqualTo(a + 2L * PAGE);
        assertThat(space.allocatedBytes()).isEqualTo(4L * PAGE);
        assertThat(space.residentPages()).isZero();
        assertThat(kernel.stats().freeFrames()).isEqualTo(32);
    }

    @Test
    void nonResidentPagesListsThePagesOfARangeWithoutAFrame() {
        long base = space.allocate(6 * PAGE);
        space.touch(base + PAGE, true);
        space.touch(base + 4 * PAGE, false);
        long first = base / PAGE;
        assertThat(space.nonResidentPages(first, 6)).containsExactly(first, first + 2, first + 3, first + 5);
        assertThat(space.nonResidentPages(first + 1, 1)).isEmpty();
        assertThat(space.nonResidentPages(first, 0)).isEmpty();
    }

    @Test
    void overcommitIsAllowed() {
        long big = space.allocate(1L << 40);
        space.store(big + (1L << 39), new byte[] {7}, 0, 1);
        assertThat(space.residentPages()).isEqualTo(1);
    }

    @Test
    void badAllocationLengthsAreRefused() {
        assertThatThrownBy(() -> space.allocate(0)).hasMessage("allocation length must be positive, was 0");
        assertThatThrownBy(() -> space.allocate(1L << 50))
                .isInstanceOf(KernelException.class)
                .hasMessageContaining("of virtual address space left in endpoint " + space.id());
    }

    @Test
    void firstTouchIsAZeroFilledMinorFault() {
        long a = space.allocate(PAGE);
        byte[] out = TestKernels.pattern(9, 64);
        space.load(a + 100, out, 0, 64);
        assertThat(out).containsOnly(0);
        assertThat(kernel.counters().get(KernelCounter.CPU_FAULTS_MINOR)).isEqualTo(1);
        assertThat(space.touch(a, false)).as("resident now: no fault").isNull();
    }

    @Test
    void storesAndLoadsSpanPagesAtAnyAlignment() {
        long a = space.allocate(5 * PAGE);
        byte[] data = TestKernels.pattern(11, 3 * PAGE + 123);
        space.store(a + 4000, data, 0, data.length);
        byte[] out = new byte[data.length];
        space.load(a + 4000, out, 0, out.length);
        assertThat(out).isEqualTo(data);
        assertThat(space.residentPages()).as("bytes 4000 to 16410 touch five pages").isEqualTo(5);
    }

    @Test
    void accessOutsideAllocationsIsABadAddress() {
        long a = space.allocate(2 * PAGE);
        byte[] one = new byte[1];
        assertThatThrownBy(() -> space.load(a - 1, one, 0, 1)).isInstanceOf(BadAddressException.class)
                .hasMessageContaining("is not allocated in endpoint " + space.id());
        assertThatThrownBy(() -> space.store(a + 2L * PAGE, one, 0, 1)).as("guard page").isInstanceOf(BadAddressException.class);
        assertThatThrownBy(() -> space.load(a + PAGE, new byte[PAGE + 1], 0, PAGE + 1)).as("runs past the end").isInstanceOf(BadAddressException.class);
        assertThatThrownBy(() -> space.load(0, one, 0, 1)).isInstanceOf(BadAddressException.class);
        assertThatThrownBy(() -> space.free(a + PAGE)).isInstanceOf(BadAddressException.class)
                .hasMessageContaining("is not the start of an allocation");
        assertThat(space.isAllocated(a, 2L * PAGE)).isTrue();
        assertThat(space.isAllocated(a, 2L * PAGE + 1)).isFalse();
        assertThat(space.residentPages()).as("failed accesses touch nothing").isZero();
    }

    @Test
    void freeReturnsFramesAndForbidsLaterAccess() {
        long a = space.allocate(4 * PAGE);
        space.store(a, new byte[4 * PAGE], 0, 4 * PAGE);
        assertThat(kernel.stats().freeFrames()).isEqualTo(28);
        space.free(a);
        assertThat(kernel.stats().freeFrames()).isEqualTo(32);
        assertThat(space.residentPages()).isZero();
        assertThatThrownBy(() -> space.load(a, new byte[1], 0, 1)).isInstanceOf(BadAddressException.class);
        assertThatThrownBy(() -> space.free(a)).isInstanceOf(BadAddressException.class);
    }

    @Test
    void aClosedSpaceRefusesWorkAndHasReleasedEverything() {
        AddressSpace other = kernel.createAddressSpace();
        long a = other.allocate(3 * PAGE);
        other.store(a, new byte[3 * PAGE], 0, 3 * PAGE);
        other.pin(a / PAGE, true);
        other.close();
        assertThat(kernel.addressSpace(other.id())).isNull();
        assertThat(kernel.stats().pinnedPages()).isZero();
        assertThatThrownBy(() -> other.allocate(1)).isInstanceOf(KernelException.class).hasMessage("endpoint " + other.id() + " is closed");
        other.close();
    }

    @Test
    void spacesAreIsolated() {
        AddressSpace other = kernel.createAddressSpace();
        try {
            long a = space.allocate(PAGE);
            long b = other.allocate(PAGE);
            assertThat(a).isEqualTo(b);
            space.store(a, new byte[] {1}, 0, 1);
            other.store(b, new byte[] {2}, 0, 1);
            byte[] out = new byte[1];
            space.load(a, out, 0, 1);
            assertThat(out[0]).isEqualTo((byte) 1);
        } finally {
            other.close();
        }
    }

    @Test
    void pageOutPushesUnpinnedPagesOutAndKeepsTheirContents() {
        AddressSpace space = kernel.createAddressSpace();
        long at = space.allocate(4L * PAGE);
        byte[] data = TestKernels.pattern(9, 3 * PAGE);
        space.store(at, data, 0, data.length);
        space.pin(at / PAGE + 2, false);
        assertThat(space.residentPages()).isEqualTo(3);
        assertThat(space.pageOut(at, 4L * PAGE)).as("two pages out; the pinned one and the never-touched one not").isEqualTo(2);
        assertThat(space.isResident(at / PAGE)).isFalse();
        assertThat(space.isResident(at / PAGE + 2)).isTrue();
        long swapIns = kernel.counters().get(KernelCounter.SWAP_INS);
        byte[] back = new byte[data.length];
        space.load(at, back, 0, back.length);
        assertThat(back).isEqualTo(data);
        assertThat(kernel.counters().get(KernelCounter.SWAP_INS) - swapIns).as("read back from swap").isEqualTo(2);
        space.unpin(at / PAGE + 2);
        space.close();
    }

    @Test
    void pageOutOfAHugeMostlyUntouchedRangeCostsWhatIsInItAndABadRangeIsRefused() {
        AddressSpace space = kernel.createAddressSpace();
        long at = space.allocate(1L << 40);
        space.store(at + (1L << 39), new byte[] {5}, 0, 1);
        long start = System.nanoTime();
        assertThat(space.pageOut(at, 1L << 40)).isEqualTo(1);
        assertThat(System.nanoTime() - start).as("2^28 pages of range, one of them present").isLessThan(5_000_000_000L);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> space.pageOut(at, Long.MIN_VALUE)).isInstanceOf(BadAddressException.class);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> space.pageOut(at, 0)).isInstanceOf(BadAddressException.class);
        space.close();
    }
}
