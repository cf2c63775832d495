package io.pagewire.kernel;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

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

    /**
     * Waits until {@code thread} is parked (waiting), and, when {@code blocker} is given, parked on an
     * object of that type (a {@link SwapDevice} in its modelled I/O): the event a test of "others go on
     * meanwhile" needs, instead of a guess at how long the thread takes to get there.
     */
    static void awaitParked(Thread thread, Class<?> blocker, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            Thread.State state = thread.getState();
            boolean parked = state == Thread.State.WAITING || state == Thread.State.TIMED_WAITING;
            if (parked && (blocker == null || blocker.isInstance(LockSupport.getBlocker(thread)))) {
                return;
            }
            assertThat(System.nanoTime() - deadline).as("%s: %s is %s after 10 s", what, thread.getName(), state).isNegative();
            Thread.sleep(1);
        }
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
