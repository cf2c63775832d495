package io.pagewire.kernel;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.BitSet;

/**
 * The swap device: a file of page-sized slots, handed out one per swapped page. Pages move between
 * frames and slots without a copy through the heap. Slots are handed out and returned under the
 * kernel lock; reads and writes run without it (positional file I/O, safe from any thread), each
 * taking at least the configured access latency.
 */
final class SwapDevice implements AutoCloseable {
    private final Path path;
    private final boolean temporary;
    private final FileChannel channel;
    private final int pageSize;
    private final int slotCount;
    private final BitSet used;
    private int usedCount;
    private int searchFrom;
    private final long accessLatencyNs;

    SwapDevice(Path file, long bytes, int pageSize, long accessLatencyNs) {
        this.accessLatencyNs = accessLatencyNs;
        this.pageSize = pageSize;
        this.slotCount = (int) (bytes / pageSize);
        this.used = new BitSet(slotCount);
        try {
            this.temporary = file == null;
            this.path = temporary ? Files.createTempFile("pagewire-swap-", ".img") : file;
            this.channel = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot open swap file " + file + ": " + e.getMessage(), e);
        }
    }

    int slotCount() {
        return slotCount;
    }

    int usedCount() {
        return usedCount;
    }

    boolean isFull() {
        return usedCount == slotCount;
    }

    /** A free slot, marked used; -1 when the device is full. */
    int allocate() {
        if (isFull()) {
            return -1;
        }
        int slot = used.nextClearBit(searchFrom);
        if (slot >= slotCount) {
            slot = used.nextClearBit(0);
        }
        used.set(slot);
        usedCount++;
        searchFrom = slot + 1;
        return slot;
    }

    void release(int slot) {
        if (!used.get(slot)) {
            throw new IllegalStateException("swap slot " + slot + " is not in use");
        }
        used.clear(slot);
        usedCount--;
    }

    void write(int slot, PhysicalMemory memory, int frame) {
        waitAccessLatency();
        try {
            memory.writeTo(channel, (long) slot * pageSize, frame);
        } catch (IOException e) {
            throw new KernelException("swap device " + path + ": writing slot " + slot + " failed: " + e.getMessage(), e);
        }
    }

    void read(int slot, PhysicalMemory memory, int frame) {
        waitAccessLatency();
        try {
            memory.readFrom(channel, (long) slot * pageSize, frame);
        } catch (IOException e) {
            throw new KernelException("swap device " + path + ": reading slot " + slot + " failed: " + e.getMessage(), e);
        }
    }

    private void waitAccessLatency() {
        long deadline = System.nanoTime() + accessLatencyNs;
        for (long left = accessLatencyNs; left > 0; left = deadline - System.nanoTime()) {
            java.util.concurrent.locks.LockSupport.parkNanos(this, left);
        }
    }

    @Override
    public void close() {
        try {
            channel.close();
            if (temporary) {
                Files.deleteIfExists(path);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("closing swap file " + path, e);
        }
    }
}
