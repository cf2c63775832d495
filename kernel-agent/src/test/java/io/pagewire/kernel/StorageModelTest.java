package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The swap device takes what its model says (access latency, bandwidth, queue depth), so a major
 * fault costs at least the device's read latency while a minor one does not; the fault handler's
 * own overhead is charged to every fault. Only lower bounds are timed exactly; the one upper bound
 * (a minor fault shorter than a device access) has a 100 ms margin.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class StorageModelTest {
    private static final long DEVICE_LATENCY_NS = 100_000_000L;

    @Test
    void aMajorFaultTakesAtLeastTheDevicesReadLatencyAndAMinorOneDoesNot() throws Exception {
        StorageModel device = StorageModel.RAM.withReadLatencyNs(DEVICE_LATENCY_NS);
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(16, 64).swapDevice(device));
                AddressSpace space = kernel.createAddressSpace()) {
            long page = space.allocate(PAGE);
            space.store(page, TestKernels.pattern(7, PAGE), 0, PAGE);
            long others = space.allocate(32L * PAGE);
            for (int p = 0; p < 20; p++) {
                space.touch(others + (long) p * PAGE, false);
            }
            assertThat(space.isResident(page / PAGE)).as("the dirty page went to swap").isFalse();

            PageFault major = kernel.faultService().submit(space, page / PAGE, false).get(10, TimeUnit.SECONDS);
            PageFault minor = kernel.faultService().submit(space, others / PAGE + 25, true).get(10, TimeUnit.SECONDS);

            assertThat(major.kind()).isEqualTo(FaultKind.MAJOR);
            assertThat(major.serviceTimeNs()).as("a major fault's service time").isGreaterThanOrEqualTo(DEVICE_LATENCY_NS);
            assertThat(minor.kind()).isEqualTo(FaultKind.MINOR);
            assertThat(minor.serviceTimeNs()).as("a minor fault's service time").isLessThan(DEVICE_LATENCY_NS);
            byte[] read = new byte[PAGE];
            space.load(page, read, 0, PAGE);
            assertThat(read).isEqualTo(TestKernels.pattern(7, PAGE));
        }
    }

    @Test
    void theFaultHandlersOverheadIsChargedToEveryFault() throws Exception {
        long overhead = 30_000_000L;
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(16, 64).swapDevice(StorageModel.RAM).faultOverheadNs(overhead));
                AddressSpace space = kernel.createAddressSpace()) {
            long page = space.allocate(PAGE);
            PageFault minor = kernel.faultService().submit(space, page / PAGE, true).get(10, TimeUnit.SECONDS);
            assertThat(minor.kind()).isEqualTo(FaultKind.MINOR);
            assertThat(minor.serviceTimeNs()).isGreaterThanOrEqualTo(overhead);
            long start = System.nanoTime();
            assertThat(space.touch(page, false)).as("a resident page: no fault, no overhead").isNull();
            assertThat(System.nanoTime() - start).isLessThan(overhead);
        }
    }

    @Test
    void requestsBeyondTheQueueDepthWaitForASlot() throws Exception {
        StorageModel oneAtATime = StorageModel.RAM.withLatencyNs(50_000_000L).withQueueDepth(1);
        assertThat(timeConcurrentReads(oneAtATime, 4)).as("4 reads of 50 ms, one at a time").isGreaterThanOrEqualTo(200_000_000L);
        StorageModel fourAtATime = oneAtATime.withQueueDepth(4);
        assertThat(timeConcurrentReads(fourAtATime, 4)).as("4 reads of 50 ms overlapped").isLessThan(200_000_000L);
    }

    /**
     * NIC faults on different pages are served by several handler threads at once, so that they
     * overlap on the device as far as its queue depth lets them: four major faults on a device of
     * 50 ms and depth 4 take about 50 ms with four handlers, at least 200 ms with one.
     */
    @Test
    void nicFaultsOnDifferentPagesOverlapOnTheDevice() throws Exception {
        StorageModel device = StorageModel.RAM.withReadLatencyNs(50_000_000L).withQueueDepth(4);
        assertThat(timeMajorNicFaults(device, 1, 4)).as("4 major faults, one handler").isGreaterThanOrEqualTo(200_000_000L);
        assertThat(timeMajorNicFaults(device, 4, 4)).as("4 major faults, four handlers").isLessThan(200_000_000L);
        assertThatThrownBy(() -> TestKernels.context(16, 64).faultHandlers(0).conclude())
                .hasMessageContaining("pagewire.kernel.faultHandlers must be from 1 to 256");
    }

    /** Nanoseconds from submitting {@code pages} major NIC faults (pages swapped out first) to the last one's end. */
    private static long timeMajorNicFaults(StorageModel device, int handlers, int pages) throws Exception {
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(16, 64).swapDevice(device).faultHandlers(handlers));
                AddressSpace space = kernel.createAddressSpace()) {
            long cold = space.allocate((long) pages * PAGE);
            for (int p = 0; p < pages; p++) {
                space.store(cold + (long) p * PAGE, TestKernels.pattern(p, PAGE), 0, PAGE);
            }
            long others = space.allocate(32L * PAGE);
            for (int p = 0; p < 20; p++) {
                space.touch(others + (long) p * PAGE, false);
            }
            for (int p = 0; p < pages; p++) {
                assertThat(space.isResident(cold / PAGE + p)).as("page " + p + " went to swap").isFalse();
            }
            List<CompletableFuture<PageFault>> faults = new ArrayList<>();
            long start = System.nanoTime();
            for (int p = 0; p < pages; p++) {
                faults.add(kernel.faultService().submit(space, cold / PAGE + p, false));
            }
            for (var fault : faults) {
                assertThat(fault.get(10, TimeUnit.SECONDS).kind()).isEqualTo(FaultKind.MAJOR);
            }
            long took = System.nanoTime() - start;
            for (int p = 0; p < pages; p++) {
                byte[] read = new byte[PAGE];
                space.load(cold + (long) p * PAGE, read, 0, PAGE);
                assertThat(read).as("page " + p + " read back from swap").isEqualTo(TestKernels.pattern(p, PAGE));
            }
            return took;
        }
    }

    @Test
    void transfersShareTheDevicesBandwidth() throws Exception {
        StorageModel slow = StorageModel.RAM.withBytesPerSecond(20L * PAGE); // 50 ms a page
        assertThat(timeConcurrentReads(slow, 4)).as("4 pages at 20 pages a second").isGreaterThanOrEqualTo(200_000_000L);
        assertThat(slow.transferNs(PAGE)).isEqualTo(50_000_000L);
    }

    @Test
    void presetsByNameAndSingleFiguresOverrideThemWhicheverIsSetFirst() {
        assertThat(StorageModel.preset("knob", " NVMe ")).isEqualTo(StorageModel.NVME);
        assertThat(StorageModel.preset("knob", "sata-ssd")).isEqualTo(StorageModel.SATA_SSD);
        assertThat(StorageModel.HDD.queueDepth()).isEqualTo(1);
        assertThat(StorageModel.RAM.transferNs(PAGE)).isZero();
        assertThatThrownBy(() -> StorageModel.preset(KernelConfiguration.SWAP_DEVICE.name(), "floppy"))
                .hasMessage("pagewire.kernel.swapDevice must be one of nvme, sata-ssd, hdd, ram, was floppy");

        KernelContext figureFirst = TestKernels.context(16, 64).swapReadLatencyNs(5_000).swapDevice(StorageModel.HDD).conclude();
        assertThat(figureFirst.swapDevice()).isEqualTo(StorageModel.HDD.withReadLatencyNs(5_000));
        assertThat(figureFirst.swapDevice().presetName()).isNull();
        assertThat(new KernelContext().swapDevice().presetName()).as("the default device").isEqualTo("nvme");
        assertThat(StorageModel.NVME.toString()).isEqualTo("nvme (read 80.0 us, write 20.0 us, 2000 MB/s, queue depth 32)");

        assertThatThrownBy(() -> TestKernels.context(16, 64).swapQueueDepth(-2).conclude())
                .hasMessageContaining("pagewire.kernel.swapQueueDepth must be zero or positive");
        assertThatThrownBy(() -> TestKernels.context(16, 64).faultOverheadNs(-1).conclude())
                .hasMessageContaining("pagewire.kernel.faultOverheadNs must be zero or positive");
    }

    /** Nanoseconds from the start of {@code readers} concurrent one-page reads to the last one's end. */
    private static long timeConcurrentReads(StorageModel model, int readers) throws InterruptedException {
        PhysicalMemory memory = new PhysicalMemory(PAGE, readers, null, new KernelCounters());
        try (SwapDevice device = new SwapDevice(null, (long) readers * PAGE, PAGE, model)) {
            List<Thread> threads = new ArrayList<>();
            long start = System.nanoTime();
            for (int r = 0; r < readers; r++) {
                int frame = r;
                Thread reader = new Thread(() -> device.read(frame, memory, frame), "reader-" + r);
                reader.start();
                threads.add(reader);
            }
            for (Thread thread : threads) {
                thread.join(10_000);
            }
            return System.nanoTime() - start;
        }
    }
}
