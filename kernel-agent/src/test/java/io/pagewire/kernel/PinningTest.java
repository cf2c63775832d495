package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class PinningTest {
    @Test
    void pinningFaultsThePageInAndCountsPerSpaceAndNode() {
        try (KernelAgent kernel = TestKernels.start(32, 64); AddressSpace a = kernel.createAddressSpace();
                AddressSpace b = kernel.createAddressSpace()) {
            long va = a.allocate(2L * PAGE);
            long vb = b.allocate(PAGE);
            Pinned first = a.pin(va / PAGE, true);
            assertThat(first.fault()).as("zero-filled at the pin").isEqualTo(FaultKind.MINOR);
            Translation t = first.translation();
            assertThat(a.isResident(va / PAGE)).isTrue();
            assertThat(t.frame()).isEqualTo(a.translate(va / PAGE).frame());
            assertThat(a.pin(va / PAGE, false).fault()).as("already resident").isNull();
            b.pin(vb / PAGE, false);
            assertThat(a.pinCount(va / PAGE)).isEqualTo(2);
            assertThat(a.pinnedPages()).as("distinct pages").isEqualTo(1);
            assertThat(kernel.stats().pinnedPages()).isEqualTo(2);
            assertThat(kernel.counters().get(KernelCounter.NIC_FAULTS_MINOR)).isEqualTo(2);
            a.unpin(va / PAGE);
            a.unpin(va / PAGE);
            b.unpin(vb / PAGE);
            assertThat(kernel.stats().pinnedPages()).isZero();
            assertThatThrownBy(() -> a.unpin(va / PAGE)).isInstanceOf(IllegalStateException.class).hasMessageContaining("is not pinned");
        }
    }

    @Test
    void theMemlockLimitIsNamedWithTheNumbers() {
        KernelContext context = TestKernels.context(16 * 1024, 0).memlockLimitBytes(64L << 20);
        try (KernelAgent kernel = KernelAgent.start(context); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(65L << 20);
            space.pinRange(va, 64L << 20);
            assertThatThrownBy(() -> space.pinRange(va + (64L << 20), 1L << 20))
                    .isInstanceOf(PinLimitExceededException.class)
                    .hasMessageStartingWith("memlock limit 64 MiB exceeded: endpoint " + space.id() + " would pin 65 MiB (64 MiB pinned now, 1 MiB more requested)")
                    .satisfies(e -> {
                        PinLimitExceededException p = (PinLimitExceededException) e;
                        assertThat(p.limit()).isEqualTo(PinLimitExceededException.Limit.MEMLOCK);
                        assertThat(p.wouldPinBytes()).isEqualTo(65L << 20);
                    });
            assertThat(space.pinnedPages()).as("the refused range pinned nothing").isEqualTo(16 * 1024);
            assertThat(kernel.counters().get(KernelCounter.PIN_LIMIT_REJECTIONS)).isEqualTo(1);
            space.unpinRange(va, 64L << 20);
        }
    }

    @Test
    void aRangeIsCheckedAgainstTheLimitsWithoutPinningOrMappingIt() {
        KernelContext context = TestKernels.context(16 * 1024, 0).memlockLimitBytes(64L << 20);
        try (KernelAgent kernel = KernelAgent.start(context); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(96L << 20);
            space.pinRange(va, 32L << 20);
            long resident = kernel.stats().residentPages();
            // pages already pinned count once: 32 MiB pinned plus 32 MiB new fits 64 MiB
            space.checkPinRange(va, 64L << 20);
            assertThatThrownBy(() -> space.checkPinRange(va, 65L << 20)).isInstanceOf(PinLimitExceededException.class)
                    .hasMessageStartingWith("memlock limit 64 MiB exceeded: endpoint " + space.id() + " would pin 65 MiB (32 MiB pinned now, 33 MiB more requested)");
            assertThatThrownBy(() -> space.checkPinRange(space.allocate(1L << 30), 1L << 30)).as("checked before anything is touched")
                    .isInstanceOf(PinLimitExceededException.class);
            assertThatThrownBy(() -> space.checkPinRange(1L << 40, 1L << 60)).as("refused without walking 2^48 pages")
                    .isInstanceOf(PinLimitExceededException.class);
            assertThatThrownBy(() -> space.checkPinRange(Long.MAX_VALUE - 10, 4096)).isInstanceOf(BadAddressException.class);
            assertThatThrownBy(() -> space.checkPinRange(va, 0)).isInstanceOf(BadAddressException.class);
            assertThat(space.pinnedPages()).as("checking pins nothing").isEqualTo(8 * 1024);
            assertThat(kernel.stats().residentPages()).as("checking faults nothing in").isEqualTo(resident);
            space.unpinRange(va, 32L << 20);
        }
    }

    @Test
    void theNodePinLimitBindsAcrossSpaces() {
        KernelContext context = TestKernels.context(64, 0).memlockLimitBytes(32L * PAGE).nodePinLimitBytes(40L * PAGE);
        try (KernelAgent kernel = KernelAgent.start(context); AddressSpace a = kernel.createAddressSpace();
                AddressSpace b = kernel.createAddressSpace()) {
            long va = a.allocate(32L * PAGE);
            long vb = b.allocate(32L * PAGE);
            a.pinRange(va, 32L * PAGE);
            assertThatThrownBy(() -> b.pinRange(vb, 9L * PAGE))
                    .isInstanceOf(PinLimitExceededException.class)
                    .hasMessage("node pin limit 160 KiB exceeded: node test would pin 164 KiB (128 KiB pinned now, 36 KiB more requested by endpoint " + b.id() + "); the node's pagewire.kernel.nodePinLimitBytes sets it (0: three quarters of pagewire.kernel.physicalMemoryBytes)");
            b.pinRange(vb, 8L * PAGE);
            assertThat(kernel.stats().pinnedBytes()).isEqualTo(40L * PAGE);
        }
    }

    @Test
    void aPinRangeThatRunsOutOfMemoryPartWayLeavesNoPins() {
        try (KernelAgent kernel = TestKernels.start(16, 0); AddressSpace space = kernel.createAddressSpace()) {
            // Without swap, ten dirty pages hold their frames for good.
            long dirty = space.allocate(10L * PAGE);
            space.store(dirty, new byte[10 * PAGE], 0, 10 * PAGE);
            long va = space.allocate(8L * PAGE);
            assertThatThrownBy(() -> space.pinRange(va, 8L * PAGE)).isInstanceOf(MemoryExhaustedException.class);
            assertThat(space.pinnedPages()).isZero();
            assertThat(kernel.stats().pinnedPages()).isZero();
        }
    }

    @Test
    void pinsOnAPageThatIsFreedAreRevoked() {
        try (KernelAgent kernel = TestKernels.start(16, 0)) {
            AddressSpace space = kernel.createAddressSpace();
            long va = space.allocate(4L * PAGE);
            space.pinRange(va, 4L * PAGE);
            space.pin(va / PAGE, true);
            space.free(va);
            assertThat(kernel.counters().get(KernelCounter.PINS_REVOKED)).isEqualTo(5);
            assertThat(space.pinnedPages()).isZero();
            space.close();
            TestKernels.assertNothingHeld(kernel);
        }
    }

    @Test
    void pinningUnallocatedMemoryIsABadAddress() {
        try (KernelAgent kernel = TestKernels.start(16, 0); AddressSpace space = kernel.createAddressSpace()) {
            assertThatThrownBy(() -> space.pin(AddressSpace.FIRST_ADDRESS / PAGE, true)).isInstanceOf(BadAddressException.class);
            assertThatThrownBy(() -> space.pinRange(AddressSpace.FIRST_ADDRESS, PAGE)).isInstanceOf(BadAddressException.class);
            assertThat(kernel.stats().pinnedPages()).isZero();
        }
    }
}
