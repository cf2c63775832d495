package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class SwapTest {
    @Test
    void aWorkingSetFourTimesMemorySurvivesPagingOutAndIn() {
        try (KernelAgent kernel = TestKernels.start(16, 128); AddressSpace space = kernel.createAddressSpace()) {
            int pages = 64;
            long base = space.allocate((long) pages * PAGE);
            for (int p = 0; p < pages; p++) {
                space.store(base + (long) p * PAGE, TestKernels.pattern(p, PAGE), 0, PAGE);
            }
            assertThat(kernel.counters().get(KernelCounter.SWAP_OUTS)).isGreaterThanOrEqualTo(pages - 16);
            for (int p = 0; p < pages; p++) {
                byte[] out = new byte[PAGE];
                space.load(base + (long) p * PAGE, out, 0, PAGE);
                assertThat(out).as("page %d", p).isEqualTo(TestKernels.pattern(p, PAGE));
            }
            assertThat(kernel.counters().get(KernelCounter.CPU_FAULTS_MAJOR)).isGreaterThanOrEqualTo(pages - 16);
            assertThat(kernel.counters().get(KernelCounter.SWAP_INS)).isEqualTo(kernel.counters().get(KernelCounter.CPU_FAULTS_MAJOR));
            assertThat(space.residentPages() + space.swappedPages()).isEqualTo(pages);
        }
    }

    @Test
    void onlyDirtyPagesAreWrittenBack() {
        try (KernelAgent kernel = TestKernels.start(16, 128); AddressSpace space = kernel.createAddressSpace()) {
            int pages = 48;
            long base = space.allocate((long) pages * PAGE);
            for (int p = 0; p < pages; p++) {
                space.store(base + (long) p * PAGE, TestKernels.pattern(p, PAGE), 0, PAGE);
            }
            // A first read pass brings pages back clean, each keeping its slot.
            readAll(space, base, pages);
            long outsAfterFirstPass = kernel.counters().get(KernelCounter.SWAP_OUTS);
            long evictionsAfterFirstPass = kernel.counters().get(KernelCounter.EVICTIONS);
            readAll(space, base, pages);
            assertThat(kernel.counters().get(KernelCounter.EVICTIONS)).as("the second pass evicts").isGreaterThan(evictionsAfterFirstPass);
            assertThat(kernel.counters().get(KernelCounter.SWAP_OUTS)).as("but writes nothing back").isEqualTo(outsAfterFirstPass);
        }
    }

    @Test
    void neverWrittenPagesAreDroppedAndComeBackAsZeros() {
        try (KernelAgent kernel = TestKernels.start(16, 0); AddressSpace space = kernel.createAddressSpace()) {
            long base = space.allocate(64L * PAGE);
            readAll(space, base, 64);
            assertThat(kernel.counters().get(KernelCounter.EVICTIONS)).isEqualTo(48);
            assertThat(kernel.counters().get(KernelCounter.SWAP_OUTS)).isZero();
            byte[] out = new byte[PAGE];
            space.load(base, out, 0, PAGE);
            assertThat(out).containsOnly(0);
        }
    }

    @Test
    void memoryAndSwapExhaustedFailsTheTouchAndCorruptsNothing() {
        try (KernelAgent kernel = TestKernels.start(16, 8); AddressSpace space = kernel.createAddressSpace()) {
            long scratch = space.allocate(4L * PAGE);
            space.store(scratch, new byte[4 * PAGE], 0, 4 * PAGE);
            long base = space.allocate(32L * PAGE);
            for (int p = 0; p < 20; p++) {
                space.store(base + (long) p * PAGE, TestKernels.pattern(p, PAGE), 0, PAGE);
            }
            // 24 dirty pages now fill 16 frames and 8 slots.
            assertThatThrownBy(() -> space.store(base + 20L * PAGE, TestKernels.pattern(20, PAGE), 0, PAGE))
                    .isInstanceOf(MemoryExhaustedException.class)
                    .hasMessageContaining("out of memory: no frame for page")
                    .hasMessageContaining("of endpoint " + space.id())
                    .hasMessageContaining("16 dirty with swap full (8 of 8 slots used)");
            assertThat(kernel.counters().get(KernelCounter.OUT_OF_MEMORY)).isEqualTo(1);
            assertThat(space.isResident(base / PAGE + 20)).as("the failed page was never mapped").isFalse();
            // Freeing some memory makes room; every page stored before the failure reads back intact.
            space.free(scratch);
            for (int p = 0; p < 20; p++) {
                byte[] out = new byte[PAGE];
                space.load(base + (long) p * PAGE, out, 0, PAGE);
                assertThat(out).as("page %d", p).isEqualTo(TestKernels.pattern(p, PAGE));
            }
            byte[] out = new byte[PAGE];
            space.load(base + 20L * PAGE, out, 0, PAGE);
            assertThat(out).as("the failed store left no partial data").containsOnly(0);
        }
    }

    @Test
    void aPageWrittenAfterSwapInGivesUpItsStaleSlot() {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long base = space.allocate(32L * PAGE);
            for (int p = 0; p < 32; p++) {
                space.store(base + (long) p * PAGE, TestKernels.pattern(p, PAGE), 0, PAGE);
            }
            int slotsBefore = kernel.stats().swapSlotsUsed();
            assertThat(space.isResident(base / PAGE)).isFalse();
            space.store(base, TestKernels.pattern(100, PAGE), 0, PAGE);
            assertThat(kernel.stats().swapSlotsUsed()).isLessThanOrEqualTo(slotsBefore);
            for (int p = 1; p < 32; p++) {
                space.load(base + (long) p * PAGE, new byte[PAGE], 0, PAGE);
            }
            byte[] out = new byte[PAGE];
            space.load(base, out, 0, PAGE);
            assertThat(out).isEqualTo(TestKernels.pattern(100, PAGE));
        }
    }

    private static void readAll(AddressSpace space, long base, int pages) {
        byte[] out = new byte[PAGE];
        for (int p = 0; p < pages; p++) {
            space.load(base + (long) p * PAGE, out, 0, PAGE);
        }
    }
}
