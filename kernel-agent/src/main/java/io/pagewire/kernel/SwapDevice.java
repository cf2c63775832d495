package io.pagewire.kernel;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.BitSet;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The swap device: a file of page-sized slots, handed out one per swapped page. Pages move between
 * frames and slots without a copy through the heap. Slots are handed out and returned under the
 * kernel lock; reads and writes run without it (positional file I/O, safe from any thread), each
 * taking at least what its {@link StorageModel} says: a request takes one of the device's queue
 * slots (waiting for one when all are in service), waits its access latency, then its transfer in
 * turn with the other requests' transfers, then does the file I/O.
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
    private final StorageModel model;
    /** The device's queue slots; null without a queue-depth limit. */
    private final Semaphore queue;
    /** When the device's transfer channel is next free (System.nanoTime). */
    private final AtomicLong transferFreeAtNs = new AtomicLong(Long.MIN_VALUE);

    SwapDevice(Path file, long bytes, int pageSize, StorageModel model) {
        this.model = model;
        this.queue = model.queueDepth() == 0 ? null : new Semaphore(model.queueDepth(), true);
        this.pageSize = pageSize;
        this.slotCount = (int) (bytes / pageSize);
        this.used = new BitSet(slotCount);
        try {
            this.temporary = file == null;
            this.path = temporary ? Files.createTempFile("pagewire-swap-", ".img") : file;
            this.channel = FileChannel.open(path, StandardOpenOption.CREATE, StandardOpenOption.READ,
                    StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING);
            if (temporary) {
                // Nobody else opens it: unlinked now, it goes with the node however the node ends (a kill -9 included).
                Files.deleteIfExists(path);
            }
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

    StorageModel model() {
        return model;
    }

    void write(int slot, PhysicalMemory memory, int frame) {
        enterQueue();
        try {
            awaitService(model.writeLatencyNs());
            memory.writeTo(channel, (long) slot * pageSize, frame);
        } catch (IOException e) {
            throw new KernelException("swap device " + path + ": writing slot " + slot + " failed: " + e.getMessage(), e);
        } finally {
            leaveQueue();
        }
    }

    void read(int slot, PhysicalMemory memory, int frame) {
        enterQueue();
        try {
            awaitService(model.readLatencyNs());
            memory.readFrom(channel, (long) slot * pageSize, frame);
        } catch (IOException e) {
            throw new KernelException("swap device " + path + ": reading slot " + slot + " failed: " + e.getMessage(), e);
        } finally {
            leaveQueue();
        }
    }

    private void enterQueue() {
        if (queue != null) {
            queue.acquireUninterruptibly();
        }
    }

    private void leaveQueue() {
        if (queue != null) {
            queue.release();
        }
    }

    /**
     * Waits out one request's service: its access latency, overlapped with other requests in
     * service, then its page's transfer, after the transfers booked before it.
     */
    private void awaitService(long latencyNs) {
        long transferNs = model.transferNs(pageSize);
        if (latencyNs == 0 && transferNs == 0) {
            return;
        }
        long done = System.nanoTime() + latencyNs;
        if (transferNs > 0) {
            long ready = done;
            long freeAt;
            do {
                freeAt = transferFreeAtNs.get();
                done = Math.max(ready, freeAt) + transferNs;
            } while (!transferFreeAtNs.compareAndSet(freeAt, done));
        }
        ModelledWait.until(done, this); // interrupted: the agent is closing, and the I/O is done at once
    }

    @Override
    public void close() {
        try {
            channel.close();
        } catch (IOException e) {
            throw new UncheckedIOException("closing swap file " + path, e);
        }
    }
}
