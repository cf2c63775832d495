package io.pagewire.client.impl;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.ring.MemoryFile;
import io.pagewire.ring.PageTableFile;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The application's threads as the node's CPUs, over a real memory file and page table that the test
 * writes as the node would: copies and word atomics land in the frames the table names, a page that
 * is not resident is one fault request for the rest of the copy, and a table that names a frame the
 * memory does not have is refused.
 */
class CpuMemoryTest {
    private static final int PAGE = 4096;
    private static final int FRAMES = 16;
    private static final long FIRST_VPN = 0x10000;
    private static final long BASE = FIRST_VPN * PAGE;

    @TempDir
    Path dir;
    private MemoryFile memory;
    private PageTableFile table;
    /** Each fault request the CPU raised: {address, length, write}. */
    private final List<long[]> faults = new ArrayList<>();
    private int nextFrame = 3; // frames 0-2 belong to "other pages"

    private CpuMemory cpu() {
        memory = MemoryFile.create(dir.resolve("node.memory"), PAGE, FRAMES, 0L);
        table = PageTableFile.create(dir.resolve("space.pages"), 1, Integer.numberOfTrailingZeros(PAGE), FIRST_VPN, 8);
        return new CpuMemory(memory, table, 1, (address, length, write) -> {
            faults.add(new long[] {address, length, write ? 1 : 0});
            for (long page = address; page < address + length; page += PAGE) {
                if (!PageTableFile.present(table.entry(page / PAGE))) {
                    table.map(page / PAGE, nextFrame++); // the node brings the page in
                }
            }
        });
    }

    @Test
    void aCopyAcrossPagesFaultsTheMissingOnesInOneRequestAndLandsInTheirFrames() {
        CpuMemory cpu = cpu();
        byte[] data = new byte[2 * PAGE + 100];
        new Random(7).nextBytes(data);
        long at = BASE + PAGE - 50; // the last 50 bytes of page 0, pages 1 and 2, 50 bytes of page 3
        cpu.store(at, data, 0, data.length);
        assertThat(faults).hasSize(1);
        assertThat(faults.get(0)).as("from page 0 to the end of the copy").containsExactly(BASE, PAGE - 50L + data.length, 1L);
        assertThat(PageTableFile.frameOf(table.entry(FIRST_VPN + 1))).isEqualTo(4);
        byte[] inFrame = new byte[PAGE];
        memory.read(4, 0, ByteBuffer.wrap(inFrame), PAGE);
        assertThat(inFrame[0]).as("page 1's first byte, in frame 4").isEqualTo(data[50]);

        byte[] back = new byte[data.length];
        cpu.load(at, back, 0, back.length);
        assertThat(back).isEqualTo(data);
        assertThat(faults).as("resident pages are read without a call").hasSize(1);
    }

    @Test
    void wordAtomicsWorkOnTheFrameAndRefuseMisalignedAddresses() {
        CpuMemory cpu = cpu();
        long word = BASE + 3 * PAGE + 64;
        cpu.storeLong(word, 40);
        assertThat(cpu.fetchAddLong(word, 2)).isEqualTo(40);
        assertThat(cpu.compareAndSwapLong(word, 7, 9)).as("not 7: unchanged").isEqualTo(42);
        assertThat(cpu.compareAndSwapLong(word, 42, 9)).isEqualTo(42);
        assertThat(cpu.loadLong(word)).isEqualTo(9);
        assertThat(cpu.peekLong(word, -1)).isEqualTo(9);
        assertThat(cpu.peekLong(BASE + 5 * PAGE, -1)).as("not resident: peeking faults nothing").isEqualTo(-1);
        assertThat(faults).hasSize(1);
        ByteBuffer le = ByteBuffer.allocate(8);
        memory.read(PageTableFile.frameOf(table.entry(word / PAGE)), 64, le, 8);
        assertThat(le.flip().order(java.nio.ByteOrder.LITTLE_ENDIAN).getLong()).isEqualTo(9);
        assertThatThrownBy(() -> cpu.loadLong(word + 4)).isInstanceOf(IllegalArgumentException.class).hasMessageContaining("aligned");
        assertThatThrownBy(() -> cpu.fetchAddLong(word + 1, 1)).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void onlyTheTablesPagesAreReachedDirectly() {
        CpuMemory cpu = cpu();
        assertThat(cpu.covers(BASE, 8 * PAGE)).isTrue();
        assertThat(cpu.covers(BASE, 8 * PAGE + 1)).isFalse();
        assertThat(cpu.covers(BASE - 1, 2)).isFalse();
        assertThat(cpu.covers(BASE, 0)).isFalse();
        assertThat(cpu.covers(Long.MAX_VALUE - 4, 8)).as("a range that wraps").isFalse();
    }

    @Test
    void aTableThatNamesAFrameTheMemoryDoesNotHaveIsRefused() {
        CpuMemory cpu = cpu();
        table.map(FIRST_VPN, FRAMES + 5);
        assertThatThrownBy(() -> cpu.loadLong(BASE)).isInstanceOf(IllegalStateException.class).hasMessageContaining("frame 21 of 16");
        assertThatThrownBy(() -> cpu.store(BASE, new byte[8], 0, 8)).isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aFaultTheNodeRefusesReachesTheCallerAndWritesNothing() {
        memory = MemoryFile.create(dir.resolve("node.memory"), PAGE, FRAMES, 0L);
        table = PageTableFile.create(dir.resolve("space.pages"), 1, Integer.numberOfTrailingZeros(PAGE), FIRST_VPN, 8);
        CpuMemory cpu = new CpuMemory(memory, table, 1, (address, length, write) -> {
            throw new IllegalStateException("0x" + Long.toHexString(address) + " is not allocated");
        });
        assertThatThrownBy(() -> cpu.storeLong(BASE + 8, 1)).hasMessageContaining("is not allocated");
        assertThat(PageTableFile.present(table.entry(FIRST_VPN))).isFalse();
        assertThatThrownBy(() -> new CpuMemory(memory, table, 0, (a, l, w) -> { })).isInstanceOf(IllegalArgumentException.class);
    }
}
