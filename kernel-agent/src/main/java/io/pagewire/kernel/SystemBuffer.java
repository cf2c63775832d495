package io.pagewire.kernel;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * NetVM's system buffer: a per-node buffer of slots (a page each, or 64 KiB with larger pages) that parks received data whose
 * destination page is not resident. Parking a part queues a page fault; once the page is in, the
 * agent copies every part parked for it into place, in arrival order and exactly once, and then
 * completes each part, which is when the NIC returns the sender's credit.
 *
 * <p>One slot is one credit: a sender holding a credit per page-sized part (at most a slot) it may send can never
 * overrun the buffer, and {@link #park} refuses data with no free slot rather than drop any.
 */
public final class SystemBuffer {
    private final KernelAgent kernel;
    private final PhysicalMemory memory;
    private final KernelCounters counters;
    /** The largest slot: with huge pages a part is at most an MTU, which the NIC keeps under this. */
    public static final int MAX_SLOT_BYTES = 64 << 10;

    private final int pageSize;
    private final int slotBytes;
    private final ByteBuffer storage;
    private final int[] freeSlots;
    private int freeCount;
    private int peakInUse;
    /** Parts waiting for their page, per page, in arrival order. Guarded by this. */
    private final Map<PageKey, ArrayDeque<Parked>> parkedByPage = new HashMap<>();
    /** Parts parked and not yet completed; read without the lock on the NIC's receive path. */
    private volatile int parkedCount;

    SystemBuffer(KernelAgent kernel, int slotCount) {
        this.kernel = kernel;
        this.memory = kernel.memory();
        this.counters = kernel.counters();
        this.pageSize = memory.pageSize();
        this.slotBytes = slotBytes(pageSize);
        this.storage = ByteBuffer.allocateDirect(slotCount * slotBytes);
        this.freeSlots = new int[slotCount];
        for (int i = slotCount - 1; i >= 0; i--) {
            freeSlots[freeCount++] = i;
        }
    }

    /** Returns the buffer's off-heap memory at once; the kernel agent is closing. */
    synchronized void free() {
        DirectBuffers.free(storage);
    }

    /** Slots in the buffer: the credits a node can grant in all. */
    public int slotCount() {
        return freeSlots.length;
    }

    /** Bytes one slot (one credit) holds: a page, or {@link #MAX_SLOT_BYTES} when pages are larger. */
    public int slotBytes() {
        return slotBytes;
    }

    /** The slot size for a page size. */
    public static int slotBytes(int pageSize) {
        return Math.min(pageSize, MAX_SLOT_BYTES);
    }

    /** The most slots ever in use at once: never more than {@link #slotCount}, which credits are meant to guarantee. */
    public synchronized int peakSlotsInUse() {
        return peakInUse;
    }

    public synchronized int slotsInUse() {
        return freeSlots.length - freeCount;
    }

    /**
     * Whether data parked for this page is still waiting. Data for such a page must be parked too,
     * even if the page is resident now, or it would land before data that arrived earlier.
     */
    public boolean hasParked(AddressSpace space, long vpn) {
        if (parkedCount == 0) {
            return false;
        }
        synchronized (this) {
            return parkedByPage.containsKey(new PageKey(space, vpn));
        }
    }

    /**
     * Parks the remaining bytes of {@code data}, destined for {@code address} in {@code space}, and
     * brings the page in. All the bytes must fall in one page.
     *
     * @param completion told once: after the bytes are in place, or with the error that stopped them
     * @throws SystemBufferFullException if no slot is free (a sender overran its credits)
     */
    public void park(AddressSpace space, long address, ByteBuffer data, ParkCompletion completion) {
        int length = data.remaining();
        int offset = (int) (address & (pageSize - 1));
        if (length == 0 || offset + length > pageSize || length > slotBytes) {
            throw new IllegalArgumentException("a parked part must be 1 to " + Math.min(slotBytes, pageSize - offset)
                    + " bytes within one page, was " + length + " at page offset " + offset);
        }
        long vpn = address >>> space.pageShift();
        PageKey key = new PageKey(space, vpn);
        boolean firstForPage;
        synchronized (this) {
            if (freeCount == 0) {
                throw new SystemBufferFullException("system buffer of node " + kernel.context().name() + " is full: all "
                        + freeSlots.length + " slots (" + ByteSizes.format((long) freeSlots.length * slotBytes)
                        + ") hold parked data; a sender overran its credits");
            }
            int slot = freeSlots[--freeCount];
            peakInUse = Math.max(peakInUse, freeSlots.length - freeCount);
            storage.put(slot * slotBytes, data, data.position(), length);
            data.position(data.position() + length);
            ArrayDeque<Parked> queue = parkedByPage.get(key);
            firstForPage = queue == null;
            if (firstForPage) {
                queue = new ArrayDeque<>();
                parkedByPage.put(key, queue);
            }
            queue.add(new Parked(slot, offset, length, completion));
            parkedCount++;
        }
        counters.increment(KernelCounter.SYSTEM_BUFFER_PARKED);
        counters.add(KernelCounter.SYSTEM_BUFFER_PARKED_BYTES, length);
        if (firstForPage) {
            requestPage(key);
        }
    }

    private void requestPage(PageKey key) {
        kernel.faultService().submit(key.space(), key.vpn(), true).whenComplete((fault, error) -> deliver(key, error));
    }

    /**
     * Copies the parts parked for a page into it, oldest first. Runs on the fault-handler thread that
     * served the page's fault (other pages' deliveries may run beside it on the others) and is the
     * only deliverer of a page's parts while their queue exists.
     */
    private void deliver(PageKey key, Throwable faultError) {
        if (faultError != null) {
            discardPage(key, faultError);
            return;
        }
        while (true) {
            Parked part;
            synchronized (this) {
                ArrayDeque<Parked> queue = parkedByPage.get(key);
                if (queue == null) {
                    return;
                }
                part = queue.peek();
                if (part == null) {
                    parkedByPage.remove(key);
                    return;
                }
            }
            Translation translation;
            try {
                translation = key.space().translate(key.vpn());
            } catch (KernelException e) {
                discardPage(key, e);
                return;
            }
            if (translation == null || !memory.tryLockForDma(translation.frame(), translation.generation())) {
                // Evicted again before we got to it: fault it back in and carry on from there.
                requestPage(key);
                return;
            }
            try {
                synchronized (this) {
                    // Read under the lock: discard may have released the slot meanwhile.
                    if (part.done) {
                        continue;
                    }
                    memory.write(translation.frame(), part.offset,
                            storage.slice(part.slot * slotBytes, part.length));
                    part.done = true;
                    ArrayDeque<Parked> queue = parkedByPage.get(key);
                    queue.poll();
                    if (queue.isEmpty()) {
                        parkedByPage.remove(key);
                    }
                    release(part);
                }
            } finally {
                memory.unlockDma(translation.frame(), true);
            }
            counters.increment(KernelCounter.SYSTEM_BUFFER_DELIVERED);
            part.completion.completed(null);
        }
    }

    /** Drops every part parked for pages [firstVpn, endVpn) of a space being unmapped. Kernel lock held. */
    void discard(AddressSpace space, long firstVpn, long endVpn) {
        if (parkedCount == 0) {
            return;
        }
        List<Parked> dropped = new ArrayList<>();
        synchronized (this) {
            Iterator<Map.Entry<PageKey, ArrayDeque<Parked>>> it = parkedByPage.entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry<PageKey, ArrayDeque<Parked>> e = it.next();
                PageKey key = e.getKey();
                if (key.space() == space && key.vpn() >= firstVpn && key.vpn() < endVpn) {
                    takeAll(e.getValue(), dropped);
                    it.remove();
                }
            }
        }
        if (!dropped.isEmpty()) {
            BadAddressException error = new BadAddressException("the destination memory of parked data in " + space + " was freed");
            // We hold the kernel lock; completion handlers take the NIC's locks, so they run later.
            kernel.faultService().execute(() -> completeDiscarded(dropped, error));
        }
    }

    private void discardPage(PageKey key, Throwable error) {
        List<Parked> dropped = new ArrayList<>();
        synchronized (this) {
            ArrayDeque<Parked> queue = parkedByPage.remove(key);
            if (queue != null) {
                takeAll(queue, dropped);
            }
        }
        completeDiscarded(dropped, error);
    }

    private void takeAll(ArrayDeque<Parked> queue, List<Parked> into) {
        for (Parked part : queue) {
            if (!part.done) {
                part.done = true;
                release(part);
                into.add(part);
            }
        }
        queue.clear();
    }

    private void completeDiscarded(List<Parked> dropped, Throwable error) {
        for (Parked part : dropped) {
            counters.increment(KernelCounter.SYSTEM_BUFFER_DISCARDED);
            part.completion.completed(error);
        }
    }

    /** Guarded by this. */
    private void release(Parked part) {
        freeSlots[freeCount++] = part.slot;
        parkedCount--;
    }

    /** Told once what became of a part parked in the system buffer. */
    @FunctionalInterface
    public interface ParkCompletion {
        /**
         * @param failure null when the bytes are in their page; else why they never will be
         */
        void completed(Throwable failure);
    }

    private static final class Parked {
        final int slot;
        final int offset;
        final int length;
        final ParkCompletion completion;
        /** Copied or discarded; guarded by the buffer. */
        boolean done;

        Parked(int slot, int offset, int length, ParkCompletion completion) {
            this.slot = slot;
            this.offset = offset;
            this.length = length;
            this.completion = completion;
        }
    }
}
