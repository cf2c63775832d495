package io.pagewire.kernel;

import static io.pagewire.kernel.TestKernels.PAGE;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

class InvalidationTest {
    /** Records what it is told, and checks the frame still holds the page's data while it is told. */
    private static final class RecordingListener implements MemoryListener {
        final List<String> events = new ArrayList<>();
        final List<Translation> mapped = new ArrayList<>();

        @Override
        public void mapped(AddressSpace space, long vpn, Translation translation) {
            events.add("map " + vpn);
            mapped.add(translation);
        }

        @Override
        public void invalidate(AddressSpace space, long firstVpn, long pageCount, InvalidationReason reason) {
            events.add(reason + " " + firstVpn + "+" + pageCount);
        }
    }

    @Test
    void listenersHearOfMapsAndEvictionsBeforeTheFrameIsReused() {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long base = space.allocate(17L * PAGE);
            long firstVpn = base / PAGE;
            List<String> order = new ArrayList<>();
            Map<Long, Integer> frameOf = new HashMap<>();
            space.addListener(new MemoryListener() {
                @Override
                public void mapped(AddressSpace s, long vpn, Translation t) {
                    frameOf.put(vpn, t.frame());
                    order.add("map " + (vpn - firstVpn) + " frame " + t.frame());
                }

                @Override
                public void invalidate(AddressSpace s, long vpn, long count, InvalidationReason reason) {
                    // The frame still holds the evicted page while we are told.
                    byte[] out = new byte[1];
                    kernel.memory().read(frameOf.get(vpn), 0, out, 0, 1);
                    order.add(reason + " " + (vpn - firstVpn) + " holding " + out[0]);
                }
            });
            for (int p = 0; p < 17; p++) {
                space.store(base + (long) p * PAGE, new byte[] {(byte) (p + 1)}, 0, 1);
            }
            assertThat(order).hasSize(18);
            assertThat(order.get(16)).isEqualTo("EVICTION 0 holding 1");
            assertThat(order.get(17)).startsWith("map 16 frame ");
            assertThat(kernel.counters().get(KernelCounter.INVALIDATIONS)).isEqualTo(1);
        }
    }

    @Test
    void aTranslationThatRacedWithEvictionIsDetectedAndNeverUsed() {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            long page = space.allocate(PAGE);
            space.store(page, new byte[] {42}, 0, 1);
            Translation stale = space.translate(page / PAGE);
            assertThat(space.isCurrent(stale)).isTrue();
            // The page is evicted after the translation was made ...
            long cold = space.allocate(40L * PAGE);
            for (int p = 0; p < 40; p++) {
                space.touch(cold + (long) p * PAGE, true);
            }
            assertThat(space.isResident(page / PAGE)).isFalse();
            // ... so the NIC's read-retry check fails, and a DMA through it is refused.
            assertThat(space.isCurrent(stale)).isFalse();
            assertThat(kernel.memory().tryLockForDma(stale.frame(), stale.generation())).isFalse();
            assertThat(kernel.counters().get(KernelCounter.STALE_TRANSLATIONS)).isEqualTo(1);
            // A fresh translation after faulting back in works and sees the data.
            space.touch(page, false);
            Translation fresh = space.translate(page / PAGE);
            assertThat(kernel.memory().tryLockForDma(fresh.frame(), fresh.generation())).isTrue();
            byte[] out = new byte[1];
            kernel.memory().read(fresh.frame(), 0, out, 0, 1);
            kernel.memory().unlockDma(fresh.frame(), false);
            assertThat(out[0]).isEqualTo((byte) 42);
        }
    }

    @Test
    void freeTellsListenersToUnmapAndWaitsForInFlightDma() throws Exception {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            RecordingListener listener = new RecordingListener();
            space.addListener(listener);
            long va = space.allocate(2L * PAGE);
            space.touch(va, true);
            Translation t = space.translate(va / PAGE);
            assertThat(kernel.memory().tryLockForDma(t.frame(), t.generation())).isTrue();

            CompletableFuture<Void> free = CompletableFuture.runAsync(() -> space.free(va));
            assertThatThrownBy(() -> free.get(200, TimeUnit.MILLISECONDS))
                    .as("free must wait while a DMA holds the page").isInstanceOf(TimeoutException.class);
            kernel.memory().unlockDma(t.frame(), true);
            free.get(10, TimeUnit.SECONDS);

            assertThat(listener.events).containsExactly("map " + va / PAGE, "UNMAP " + va / PAGE + "+2");
            assertThat(kernel.memory().tryLockForDma(t.frame(), t.generation())).isFalse();
            assertThat(kernel.stats().freeFrames()).isEqualTo(16);
        }
    }

    @Test
    void aDmaThatNeverDrainsFailsTheFreeClearly() {
        AtomicLong now = new AtomicLong();
        KernelContext context = TestKernels.context(16, 0).dmaDrainTimeoutNs(1_000_000).clock(() -> now.addAndGet(100_000));
        try (KernelAgent kernel = KernelAgent.start(context); AddressSpace space = kernel.createAddressSpace()) {
            long va = space.allocate(PAGE);
            space.touch(va, true);
            Translation t = space.translate(va / PAGE);
            kernel.memory().tryLockForDma(t.frame(), t.generation());
            assertThatThrownBy(() -> space.free(va))
                    .isInstanceOf(KernelException.class)
                    .hasMessageContaining("did not drain within 1 ms");
            kernel.memory().unlockDma(t.frame(), false);
        }
    }

    @Test
    void theShadowTableCanBeKeptFromMapEvents() {
        try (KernelAgent kernel = TestKernels.start(16, 64); AddressSpace space = kernel.createAddressSpace()) {
            RecordingListener listener = new RecordingListener();
            space.addListener(listener);
            long va = space.allocate(PAGE);
            space.store(va, new byte[] {5}, 0, 1);
            Translation mapped = listener.mapped.get(0);
            assertThat(kernel.memory().tryLockForDma(mapped.frame(), mapped.generation())).isTrue();
            kernel.memory().unlockDma(mapped.frame(), false);
        }
    }
}
