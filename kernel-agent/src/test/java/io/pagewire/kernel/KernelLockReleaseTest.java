package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Nothing that waits holds the kernel lock: a swap read, a write-back or a DMA drain in one address
 * space leaves the others' translations, faults and copies free to go on; and with the lock released
 * in the middle of faults, concurrent paging still loses nothing and leaks nothing.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class KernelLockReleaseTest {
    /** Far longer than everything the other space does meanwhile. */
    private static final long SLOW_SWAP_NS = 2_000_000_000L;

    @Test
    void aSwapReadInOneSpaceDoesNotHoldUpAnother() throws Exception {
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(16, 64).swapDevice(StorageModel.RAM.withLatencyNs(SLOW_SWAP_NS)));
                AddressSpace a = kernel.createAddressSpace(); AddressSpace b = kernel.createAddressSpace()) {
            long page = a.allocate(PAGE);
            a.store(page, TestKernels.pattern(1, PAGE), 0, PAGE);
            long others = b.allocate(32L * PAGE);
            for (int p = 0; p < 16; p++) {
                b.touch(others + (long) p * PAGE, false); // clean zero pages: evicting them writes nothing
            }
            assertThat(a.isResident(page / PAGE)).as("the dirty page was written back to swap").isFalse();

            byte[] read = new byte[PAGE];
            Thread reader = new Thread(() -> a.load(page, read, 0, PAGE), "reader");
            reader.start();
            TestKernels.awaitParked(reader, SwapDevice.class, "the reader is inside its 2 s swap read");
            for (int p = 0; p < 16; p++) {
                b.translate(others / PAGE + p);
            }
            b.store(others + 16L * PAGE, TestKernels.pattern(2, 100), 0, 100); // a fault and a copy, no swap I/O
            assertThat(reader.isAlive()).as("B's translations, fault and copy finished during A's swap read").isTrue();

            reader.join(10_000);
            assertThat(read).isEqualTo(TestKernels.pattern(1, PAGE));
            assertThat(kernel.counters().get(KernelCounter.CPU_FAULTS_MAJOR)).isEqualTo(1);
        }
    }

    @Test
    void aWriteBackDoesNotHoldUpOtherSpacesAndTheEvictedPageWaitsForIt() throws Exception {
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(16, 64).swapDevice(StorageModel.RAM.withLatencyNs(SLOW_SWAP_NS)));
                AddressSpace a = kernel.createAddressSpace(); AddressSpace b = kernel.createAddressSpace();
                AddressSpace c = kernel.createAddressSpace()) {
            long page = a.allocate(PAGE);
            a.store(page, TestKernels.pattern(3, PAGE), 0, PAGE);
            long cPage = c.allocate(PAGE);
            c.touch(cPage, false);
            long others = b.allocate(32L * PAGE);
            for (int p = 0; p < 14; p++) {
                b.touch(others + (long) p * PAGE, false);
            }
            assertThat(kernel.stats().freeFrames()).isZero();
            // B's next fault must take a frame; CLOCK gives A's page (the oldest) and writes it back for 2 s.
            Thread evictor = new Thread(() -> b.touch(others + 14L * PAGE, false), "evictor");
            evictor.start();
            TestKernels.awaitParked(evictor, SwapDevice.class, "the evictor is inside its 2 s write-back");
            assertThat(c.translate(cPage / PAGE)).as("C's page is still mapped").isNotNull();
            assertThat(evictor.isAlive()).as("C's translation did not wait for the write-back").isTrue();

            byte[] read = new byte[PAGE];
            a.load(page, read, 0, PAGE); // waits for the transit to end, then faults the page back in
            assertThat(read).isEqualTo(TestKernels.pattern(3, PAGE));
            evictor.join(10_000);
            assertThat(kernel.counters().get(KernelCounter.SWAP_OUTS)).isPositive();
        }
    }

    @Test
    void aDmaDrainWhileFreeingDoesNotHoldUpAnotherSpace() throws Exception {
        try (KernelAgent kernel = TestKernels.start(16, 64);
                AddressSpace a = kernel.createAddressSpace(); AddressSpace b = kernel.createAddressSpace()) {
            long page = a.allocate(PAGE);
            a.touch(page, true);
            Translation t = a.translate(page / PAGE);
            assertThat(kernel.memory().tryLockForDma(t.frame(), t.generation())).isTrue();
            Thread freer = new Thread(() -> a.free(page), "freer");
            freer.start();
            TestKernels.awaitParked(freer, null, "the freer waits for the DMA to drain");
            long other = b.allocate(4L * PAGE);
            b.store(other, TestKernels.pattern(4, 3 * PAGE), 0, 3 * PAGE);
            assertThat(b.translate(other / PAGE)).isNotNull();
            assertThat(freer.isAlive()).as("B went on while A's free waited for DMA").isTrue();
            assertThat(a.isAllocated(page, PAGE)).as("the allocation is gone before its frames drain").isFalse();

            kernel.memory().unlockDma(t.frame(), true);
            freer.join(10_000);
            assertThat(freer.isAlive()).isFalse();
            b.free(other);
        }
    }

    @Test
    void concurrentPagingAcrossSpacesLosesNothingAndLeaksNothing() throws Exception {
        KernelAgent kernel = TestKernels.start(16, 512);
        List<AddressSpace> spaces = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<?>> workers = new ArrayList<>();
            for (int w = 0; w < 4; w++) {
                AddressSpace space = kernel.createAddressSpace();
                spaces.add(space);
                int worker = w;
                workers.add(pool.submit(() -> {
                    for (int round = 0; round < 6; round++) {
                        long base = space.allocate(24L * PAGE);
                        for (int p = 0; p < 24; p++) {
                            space.store(base + (long) p * PAGE, TestKernels.pattern(worker * 10_000L + round * 100 + p, PAGE), 0, PAGE);
                        }
                        space.pinRange(base, 2L * PAGE);
                        for (int p = 23; p >= 0; p--) {
                            byte[] out = new byte[PAGE];
                            space.load(base + (long) p * PAGE, out, 0, PAGE);
                            assertThat(out).as("worker %d round %d page %d", worker, round, p)
                                    .isEqualTo(TestKernels.pattern(worker * 10_000L + round * 100 + p, PAGE));
                        }
                        space.unpinRange(base, 2L * PAGE);
                        space.free(base);
                    }
                    return null;
                }));
            }
            for (Future<?> worker : workers) {
                worker.get(50, TimeUnit.SECONDS);
            }
            assertThat(kernel.counters().get(KernelCounter.SWAP_INS)).as("the workers paged").isPositive();
        } finally {
            pool.shutdownNow();
            spaces.forEach(AddressSpace::close);
        }
        TestKernels.assertNothingHeld(kernel);
        kernel.close();
    }
}
