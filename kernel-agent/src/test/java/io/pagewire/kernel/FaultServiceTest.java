package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class FaultServiceTest {
    @Test
    void nicFaultsAreServedAsynchronouslyAsMinorOrMajor() throws Exception {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(PAGE);
            PageFault first = kernel.faultService().submit(space, va / PAGE, true).get(10, TimeUnit.SECONDS);
            assertThat(first.kind()).as("zero fill").isEqualTo(FaultKind.MINOR);
            assertThat(space.isCurrent(first.translation())).isTrue();

            PageFault again = kernel.faultService().submit(space, va / PAGE, false).get(10, TimeUnit.SECONDS);
            assertThat(again.kind()).as("frame still present").isEqualTo(FaultKind.MINOR);
            assertThat(again.translation().frame()).isEqualTo(first.translation().frame());

            space.store(va, new byte[] {9}, 0, 1);
            long cold = space.allocate(40L * PAGE);
            for (int p = 0; p < 40; p++) {
                space.touch(cold + (long) p * PAGE, true);
            }
            PageFault major = kernel.faultService().submit(space, va / PAGE, false).get(10, TimeUnit.SECONDS);
            assertThat(major.kind()).isEqualTo(FaultKind.MAJOR);
            assertThat(major.serviceTimeNs()).isPositive();
            assertThat(kernel.counters().get(KernelCounter.NIC_FAULTS_MINOR)).isEqualTo(2);
            assertThat(kernel.counters().get(KernelCounter.NIC_FAULTS_MAJOR)).isEqualTo(1);
            byte[] out = new byte[1];
            space.load(va, out, 0, 1);
            assertThat(out[0]).isEqualTo((byte) 9);
        }
    }

    @Test
    void faultsOnOnePageQueuedTogetherAreServedOnce() throws Exception {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(PAGE);
            List<CompletableFuture<PageFault>> faults = new ArrayList<>();
            // Hold the kernel lock so that the handler cannot serve the first before the rest are queued.
            kernel.lock();
            try {
                for (int i = 0; i < 5; i++) {
                    faults.add(kernel.faultService().submit(space, va / PAGE, i == 4));
                }
            } finally {
                kernel.unlock();
            }
            for (CompletableFuture<PageFault> f : faults) {
                assertThat(f.get(10, TimeUnit.SECONDS).kind()).isEqualTo(FaultKind.MINOR);
            }
            assertThat(kernel.counters().get(KernelCounter.NIC_FAULTS_MINOR)).isEqualTo(1);
            assertThat(kernel.faultService().depth()).isZero();
        }
    }

    @Test
    void aFaultOnUnallocatedMemoryCompletesWithABadAddress() {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            CompletableFuture<PageFault> fault = kernel.faultService().submit(space, AddressSpace.FIRST_ADDRESS / PAGE, true);
            assertThatThrownBy(() -> fault.get(10, TimeUnit.SECONDS))
                    .isInstanceOf(ExecutionException.class)
                    .hasCauseInstanceOf(BadAddressException.class);
        }
    }

    @Test
    void aClosedServiceRefusesFaults() {
        KernelAgent kernel = TestKernels.start(16, 64);
        AddressSpace space = kernel.createAddressSpace();
        long va = space.allocate(PAGE);
        kernel.close();
        assertThat(kernel.faultService().submit(space, va / PAGE, true)).isCompletedExceptionally();
    }
}
