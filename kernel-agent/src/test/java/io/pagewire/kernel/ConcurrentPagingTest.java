package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.Arrays;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A DMA engine writing through cached translations while the CPU side causes constant page
 * replacement: every byte written must be found afterwards, and no DMA may land in a reclaimed frame.
 */
class ConcurrentPagingTest {
    private static final int DMA_PAGES = 24;
    private static final int ROUNDS = 40;

    @Test
    void dmaThroughCachedTranslationsNeverLosesOrMisplacesAWrite() throws Exception {
        try (KernelAgent kernel = TestKernels.start(16, 256); AddressSpace space = kernel.createAddressSpace()) {
            long dmaBase = space.allocate((long) DMA_PAGES * PAGE);
            long cpuBase = space.allocate(64L * PAGE);
            ExecutorService pool = Executors.newFixedThreadPool(2);
            try {
                Future<?> dma = pool.submit(() -> runDma(kernel, space, dmaBase));
                Future<?> cpu = pool.submit(() -> {
                    for (int round = 0; round < ROUNDS; round++) {
                        for (int p = 0; p < 64; p++) {
                            space.store(cpuBase + (long) p * PAGE, TestKernels.pattern(1000 + p, 64), 0, 64);
                        }
                    }
                });
                dma.get(60, TimeUnit.SECONDS);
                cpu.get(60, TimeUnit.SECONDS);
            } finally {
                pool.shutdownNow();
            }
            for (int p = 0; p < DMA_PAGES; p++) {
                byte[] out = new byte[8];
                space.load(dmaBase + (long) p * PAGE, out, 0, 8);
                assertThat(out).as("DMA page %d", p).isEqualTo(stamp(ROUNDS - 1, p));
            }
            for (int p = 0; p < 64; p++) {
                byte[] out = new byte[64];
                space.load(cpuBase + (long) p * PAGE, out, 0, 64);
                assertThat(out).as("CPU page %d", p).isEqualTo(TestKernels.pattern(1000 + p, 64));
            }
            assertThat(kernel.counters().get(KernelCounter.EVICTIONS)).isPositive();
        }
    }

    /** What a NIC does: translate from a cache, lock, copy, unlock; a refused lock means fault and retry. */
    private static void runDma(KernelAgent kernel, AddressSpace space, long base) {
        Translation[] cache = new Translation[DMA_PAGES];
        for (int round = 0; round < ROUNDS; round++) {
            for (int p = 0; p < DMA_PAGES; p++) {
                long vpn = base / PAGE + p;
                for (int attempt = 0; ; attempt++) {
                    assertThat(attempt).as("retries on page %d", p).isLessThan(1000);
                    Translation t = cache[p];
                    if (t == null || !kernel.memory().tryLockForDma(t.frame(), t.generation())) {
                        cache[p] = kernel.faultService().submit(space, vpn, true).join().translation();
                        continue;
                    }
                    try {
                        kernel.memory().write(t.frame(), 0, stamp(round, p), 0, 8);
                    } finally {
                        kernel.memory().unlockDma(t.frame(), true);
                    }
                    break;
                }
            }
        }
    }

    private static byte[] stamp(int round, int page) {
        byte[] b = new byte[8];
        Arrays.fill(b, (byte) (round * 31 + page));
        return b;
    }
}
