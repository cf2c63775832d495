package io.pagewire.kernel;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;

/** Small kernels and data patterns shared by the kernel tests. */
final class TestKernels {
    static final int PAGE = 4096;

    private TestKernels() {
    }

    /** A kernel with {@code frames} frames and {@code swapPages} pages of swap. */
    static KernelContext context(int frames, int swapPages) {
        return new KernelContext()
                .name("test")
                .pageSizeBytes(PAGE)
                .physicalMemoryBytes((long) frames * PAGE)
                .swapBytes((long) swapPages * PAGE)
                .memlockLimitBytes((long) frames * PAGE)
                .nodePinLimitBytes((long) frames * PAGE)
                .systemBufferBytes(4L * PAGE);
    }

    static KernelAgent start(int frames, int swapPages) {
        return KernelAgent.start(context(frames, swapPages));
    }

    /** Deterministic bytes for a page of a given address: the same seed gives the same bytes. */
    static byte[] pattern(long seed, int length) {
        byte[] bytes = new byte[length];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }

    /** After every endpoint closed: no pin, no resident page, no swap slot left behind. */
    static void assertNothingHeld(KernelAgent kernel) {
        MemoryStats stats = kernel.stats();
        assertThat(stats.pinnedPages()).as("pinned pages").isZero();
        assertThat(stats.freeFrames()).as("free frames").isEqualTo(stats.totalFrames());
        assertThat(stats.swapSlotsUsed()).as("swap slots in use").isZero();
        assertThat(stats.systemBufferSlotsUsed()).as("system buffer slots in use").isZero();
    }
}
