package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class PageReplacementTest {
    @Test
    void clockSparesAPageThatKeepsBeingAccessed() {
        // Only the very first reclaim, which finds every frame accessed, may take it.
        assertThat(hotPageEvictions(PageReplacement.CLOCK)).isLessThanOrEqualTo(1);
    }

    @Test
    void fifoEvictsAHotPageOncePerPassOfTheHand() {
        assertThat(hotPageEvictions(PageReplacement.FIFO)).isGreaterThanOrEqualTo(6);
    }

    /** Streams through 8x memory while touching one hot page between cold ones; counts how often the hot page left. */
    private static int hotPageEvictions(PageReplacement policy) {
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(16, 256).pageReplacement(policy));
                AddressSpace space = kernel.createAddressSpace()) {
            long hot = space.allocate(PAGE);
            long cold = space.allocate(128L * PAGE);
            space.touch(hot, true);
            int evictions = 0;
            for (int p = 0; p < 128; p++) {
                space.touch(cold + (long) p * PAGE, true);
                if (space.touch(hot, false) != null) {
                    evictions++;
                }
            }
            return evictions;
        }
    }

    @Test
    void pinnedPagesAreNeverEvicted() {
        try (KernelAgent kernel = TestKernels.start(16, 256); AddressSpace space = kernel.createAddressSpace()) {
            long pinned = space.allocate(4L * PAGE);
            space.pinRange(pinned, 4L * PAGE);
            space.store(pinned, TestKernels.pattern(1, 4 * PAGE), 0, 4 * PAGE);
            int[] frames = new int[4];
            for (int i = 0; i < 4; i++) {
                frames[i] = space.translate(pinned / PAGE + i).frame();
            }
            long cold = space.allocate(200L * PAGE);
            for (int p = 0; p < 200; p++) {
                space.touch(cold + (long) p * PAGE, true);
            }
            for (int i = 0; i < 4; i++) {
                Translation now = space.translate(pinned / PAGE + i);
                assertThat(now).as("pinned page %d", i).isNotNull();
                assertThat(now.frame()).isEqualTo(frames[i]);
            }
            assertThat(kernel.counters().get(KernelCounter.EVICTIONS)).isGreaterThanOrEqualTo(200 - 12);
            space.unpinRange(pinned, 4L * PAGE);
        }
    }

    @Test
    void aFrameUnderDmaIsNeverEvicted() {
        try (KernelAgent kernel = TestKernels.start(16, 256); AddressSpace space = kernel.createAddressSpace()) {
            long page = space.allocate(PAGE);
            space.touch(page, true);
            Translation t = space.translate(page / PAGE);
            assertThat(kernel.memory().tryLockForDma(t.frame(), t.generation())).isTrue();
            long cold = space.allocate(100L * PAGE);
            for (int p = 0; p < 100; p++) {
                space.touch(cold + (long) p * PAGE, true);
            }
            assertThat(space.isResident(page / PAGE)).isTrue();
            assertThat(kernel.memory().generation(t.frame())).as("never reclaimed").isEqualTo(t.generation());
            kernel.memory().unlockDma(t.frame(), true);
        }
    }

    @Test
    void whenEveryFrameIsPinnedATouchFailsClearly() {
        try (KernelAgent kernel = TestKernels.start(16, 256); AddressSpace space = kernel.createAddressSpace()) {
            long all = space.allocate(17L * PAGE);
            space.pinRange(all, 16L * PAGE);
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> space.touch(all + 16L * PAGE, true))
                    .isInstanceOf(MemoryExhaustedException.class)
                    .hasMessageContaining("of 16 frames, 16 are pinned");
        }
    }
}
