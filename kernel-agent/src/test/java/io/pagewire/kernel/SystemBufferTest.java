package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class SystemBufferTest {
    /** A completion that remembers every call, to prove it is called exactly once. */
    private static final class Completion implements SystemBuffer.ParkCompletion {
        final List<Throwable> calls = new CopyOnWriteArrayList<>();
        final CompletableFuture<Throwable> first = new CompletableFuture<>();

        @Override
        public void completed(Throwable failure) {
            calls.add(failure == null ? new Throwable("ok") : failure);
            first.complete(failure);
        }
    }

    @Test
    void dataForANonResidentPageIsParkedThenCopiedInExactlyOnce() throws Exception {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(2L * PAGE);
            assertThat(space.isResident(va / PAGE + 1)).isFalse();
            byte[] data = TestKernels.pattern(3, 1000);
            Completion done = new Completion();
            kernel.systemBuffer().park(space, va + PAGE + 96, ByteBuffer.wrap(data), done);
            assertThat(done.first.get(10, TimeUnit.SECONDS)).isNull();
            assertThat(done.calls).hasSize(1);

            byte[] out = new byte[1000];
            space.load(va + PAGE + 96, out, 0, out.length);
            assertThat(out).isEqualTo(data);
            assertThat(kernel.systemBuffer().slotsInUse()).isZero();
            assertThat(kernel.systemBuffer().hasParked(space, va / PAGE + 1)).isFalse();
            assertThat(kernel.counters().get(KernelCounter.SYSTEM_BUFFER_PARKED)).isEqualTo(1);
            assertThat(kernel.counters().get(KernelCounter.SYSTEM_BUFFER_PARKED_BYTES)).isEqualTo(1000);
            assertThat(kernel.counters().get(KernelCounter.SYSTEM_BUFFER_DELIVERED)).isEqualTo(1);
        }
    }

    @Test
    void partsForOnePageLandInArrivalOrder() throws Exception {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(PAGE);
            Completion[] done = new Completion[4];
            kernel.lock(); // keep the page out until all four are parked
            try {
                for (int i = 0; i < 4; i++) {
                    done[i] = new Completion();
                    kernel.systemBuffer().park(space, va + 10, ByteBuffer.wrap(new byte[] {(byte) i, (byte) i}), done[i]);
                }
                assertThat(kernel.systemBuffer().hasParked(space, va / PAGE)).isTrue();
                assertThat(kernel.systemBuffer().slotsInUse()).isEqualTo(4);
            } finally {
                kernel.unlock();
            }
            for (Completion c : done) {
                assertThat(c.first.get(10, TimeUnit.SECONDS)).isNull();
            }
            byte[] out = new byte[2];
            space.load(va + 10, out, 0, 2);
            assertThat(out).containsExactly(3, 3);
        }
    }

    @Test
    void aFullBufferRefusesDataInsteadOfDroppingIt() {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(8L * PAGE);
            kernel.lock();
            try {
                for (int i = 0; i < 4; i++) {
                    kernel.systemBuffer().park(space, va + (long) i * PAGE, ByteBuffer.wrap(new byte[8]), f -> { });
                }
                ByteBuffer fifth = ByteBuffer.wrap(new byte[8]);
                assertThatThrownBy(() -> kernel.systemBuffer().park(space, va + 4L * PAGE, fifth, f -> { }))
                        .isInstanceOf(SystemBufferFullException.class)
                        .hasMessage("system buffer of node test is full: all 4 slots (16 KiB) hold parked data; a sender overran its credits");
                assertThat(fifth.remaining()).as("refused data is left with the caller").isEqualTo(8);
            } finally {
                kernel.unlock();
            }
        }
    }

    @Test
    void partsForFreedMemoryAreDiscardedWithAnError() throws Exception {
        // One fault handler: it serves in order, which the check after the free relies on.
        try (KernelAgent kernel = KernelAgent.start(TestKernels.context(16, 64).faultHandlers(1)); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(PAGE);
            Completion done = new Completion();
            kernel.lock(); // park, then free before the page can come in
            try {
                kernel.systemBuffer().park(space, va, ByteBuffer.wrap(new byte[] {1}), done);
                space.free(va);
            } finally {
                kernel.unlock();
            }
            assertThat(done.first.get(10, TimeUnit.SECONDS)).isInstanceOf(BadAddressException.class);
            assertThat(done.first).as("completed off the kernel lock").isDone();
            // The queued fault then finds the page gone; the part must not be completed twice. The fault
            // handler serves in order, so once a later fault is served the earlier one has finished.
            long barrier = space.allocate(PAGE);
            kernel.faultService().submit(space, barrier / PAGE, false).get(10, TimeUnit.SECONDS);
            assertThat(done.calls).hasSize(1);
            assertThat(kernel.systemBuffer().slotsInUse()).isZero();
            assertThat(kernel.counters().get(KernelCounter.SYSTEM_BUFFER_DISCARDED)).isEqualTo(1);
        }
    }

    @Test
    void aPartMustFitInOnePage() {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(2L * PAGE);
            assertThatThrownBy(() -> kernel.systemBuffer().park(space, va + PAGE - 10, ByteBuffer.wrap(new byte[20]), f -> { }))
                    .isInstanceOf(IllegalArgumentException.class)
                    .hasMessage("a parked part must be 1 to 10 bytes within one page, was 20 at page offset 4086");
        }
    }
}
