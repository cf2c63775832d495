package io.pagewire.kernel;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.ByteBuffer;
import org.junit.jupiter.api.Test;

class PhysicalMemoryTest {
    private final KernelCounters counters = new KernelCounters();
    private final PhysicalMemory memory = new PhysicalMemory(4096, 32, null, counters);

    @Test
    void framesHoldTheirOwnBytes() {
        byte[] a = TestKernels.pattern(1, 4096);
        byte[] b = TestKernels.pattern(2, 4096);
        memory.write(3, 0, a, 0, 4096);
        memory.write(4, 0, b, 0, 4096);
        byte[] out = new byte[4096];
        memory.read(3, 0, out, 0, 4096);
        assertThat(out).isEqualTo(a);
        memory.read(4, 0, out, 0, 4096);
        assertThat(out).isEqualTo(b);
    }

    @Test
    void byteBufferCopiesAdvanceTheBuffer() {
        ByteBuffer src = ByteBuffer.wrap(TestKernels.pattern(3, 100));
        memory.write(1, 3996, src);
        assertThat(src.remaining()).isZero();
        ByteBuffer dst = ByteBuffer.allocate(100);
        memory.read(1, 3996, dst, 96);
        assertThat(dst.position()).isEqualTo(96);
        ByteBuffer view = memory.view(1, 3996, 96);
        assertThat(view.isReadOnly()).isTrue();
        assertThat(view).isEqualTo(dst.flip());
    }

    @Test
    void accessOutsideOnePageIsRefused() {
        assertThatThrownBy(() -> memory.write(0, 4000, new byte[200], 0, 200)).isInstanceOf(IndexOutOfBoundsException.class);
        assertThatThrownBy(() -> memory.read(32, 0, new byte[1], 0, 1)).isInstanceOf(IndexOutOfBoundsException.class);
    }

    @Test
    void aFreeFrameCannotBeLockedForDma() {
        assertThat(memory.tryLockForDma(5, memory.generation(5))).isFalse();
    }

    @Test
    void dmaLocksCountAndSetAccessedAndDirty() {
        memory.assign(5, false);
        memory.testAndClearAccessed(5);
        int generation = memory.generation(5);
        assertThat(memory.tryLockForDma(5, generation)).isTrue();
        assertThat(memory.tryLockForDma(5, generation)).isTrue();
        assertThat(memory.dmaLockCount(5)).isEqualTo(2);
        memory.unlockDma(5, false);
        assertThat(memory.isDirty(5)).isFalse();
        memory.unlockDma(5, true);
        assertThat(memory.dmaLockCount(5)).isZero();
        assertThat(memory.isDirty(5)).isTrue();
        assertThat(memory.testAndClearAccessed(5)).isTrue();
        assertThatThrownBy(() -> memory.unlockDma(5, false)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void reclaimWaitsForNoDmaAndMakesEarlierTranslationsStale() {
        memory.assign(6, false);
        int generation = memory.generation(6);
        assertThat(memory.tryLockForDma(6, generation)).isTrue();
        assertThat(memory.tryBeginReclaim(6)).as("reclaim must not take a frame under DMA").isFalse();
        memory.unlockDma(6, true);
        assertThat(memory.tryBeginReclaim(6)).isTrue();
        memory.assign(6, false);
        assertThat(memory.generation(6)).isEqualTo(generation + 1);
        assertThat(memory.tryLockForDma(6, generation)).as("translation from before the reclaim").isFalse();
        assertThat(counters.get(KernelCounter.STALE_TRANSLATIONS)).isEqualTo(1);
        assertThat(memory.tryLockForDma(6, generation + 1)).isTrue();
    }

    @Test
    void anAbandonedReclaimGivesTheFrameBackButNotToOldTranslations() {
        memory.assign(7, false);
        int generation = memory.generation(7);
        assertThat(memory.tryBeginReclaim(7)).isTrue();
        memory.abandonReclaim(7);
        assertThat(memory.tryLockForDma(7, generation)).isFalse();
        assertThat(memory.tryLockForDma(7, memory.generation(7))).isTrue();
    }
}
