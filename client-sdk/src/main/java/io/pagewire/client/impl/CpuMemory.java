package io.pagewire.client.impl;

import io.pagewire.ring.FaultRecord;
import io.pagewire.ring.MemoryFile;
import io.pagewire.ring.PageTableFile;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;

/**
 * The application's threads as the node's CPUs: loads, stores, word atomics and copies straight into
 * the endpoint's frames in the node's memory file, translated through the endpoint's page table
 * (mapped read-only), with no call and no ring message while a page is resident. A page that is not
 * resident is a CPU fault, raised on the session's request ring and served by the kernel agent.
 *
 * <p>Stores and atomics take the frame's guard ({@link MemoryFile#acquireGuard}) so reclaim cannot
 * take the frame while they copy, and check again that the page-table entry still names it; loads take
 * none: they read the entry and the frame's state word, copy, then read both again, and retry a copy
 * that raced with reclaim (a seqlock's read side). Either way no byte goes to, or comes from, a frame
 * that belongs to another page.
 */
final class CpuMemory {
    /** Raises a CPU fault and waits until the node served it; throws the node's error. */
    interface Faults {
        void fault(long address, int length, boolean write);
    }

    private final MemoryFile memory;
    private final PageTableFile table;
    private final int slot;
    private final int pageSize;
    private final int pageShift;
    private final Faults faults;

    CpuMemory(MemoryFile memory, PageTableFile table, int slot, Faults faults) {
        if (slot <= 0 || slot > MemoryFile.MAX_CPU_SLOT) {
            throw new IllegalArgumentException("a CPU slot is 1 to " + MemoryFile.MAX_CPU_SLOT + ", not " + slot);
        }
        if (table.pageShift() != Integer.numberOfTrailingZeros(memory.pageSize())) {
            throw new IllegalArgumentException("the page table's pages are not the memory's frames");
        }
        this.memory = memory;
        this.table = table;
        this.slot = slot;
        this.pageSize = memory.pageSize();
        this.pageShift = table.pageShift();
        this.faults = faults;
    }

    /** Whether [address, address + length) is in the part of the address space CPUs reach directly. */
    boolean covers(long address, long length) {
        return length > 0 && address >= 0 && address + length > address && table.covers(address >>> pageShift)
                && table.covers((address + length - 1) >>> pageShift);
    }

    // ---- bulk copies ------------------------------------------------------------------------------

    void store(long address, byte[] src, int offset, int length) {
        store(address, ByteBuffer.wrap(src, offset, length));
    }

    /** Copies the remaining bytes of {@code src} to [address, +remaining), page by page, advancing it. */
    void store(long address, ByteBuffer src) {
        int end = src.limit();
        long end64 = address + src.remaining();
        long at = address;
        while (src.position() < end) {
            int offset = (int) (at & (pageSize - 1));
            int chunk = Math.min(pageSize - offset, end - src.position());
            int frame = guard(at, end64);
            try {
                src.limit(src.position() + chunk);
                memory.write(frame, offset, src);
            } finally {
                src.limit(end);
                memory.releaseGuard(frame, slot, true);
            }
            at += chunk;
        }
    }

    void load(long address, byte[] dst, int offset, int length) {
        load(address, ByteBuffer.wrap(dst, offset, length));
    }

    /** Copies [address, +remaining) into {@code dst} at its position, page by page, advancing it. */
    void load(long address, ByteBuffer dst) {
        long end64 = address + dst.remaining();
        long at = address;
        int start = dst.position();
        while (dst.hasRemaining()) {
            int offset = (int) (at & (pageSize - 1));
            int chunk = Math.min(pageSize - offset, dst.remaining());
            int position = dst.position();
            while (true) {
                long entry = resident(at, end64, false);
                int frame = frameOf(entry);
                long before = memory.state(frame);
                if ((before & MemoryFile.RECLAIM) == 0) {
                    memory.read(frame, offset, dst, chunk);
                    if (unchanged(at, entry, frame, before)) {
                        break;
                    }
                    dst.position(position); // raced with reclaim: copy again
                }
                Thread.onSpinWait();
            }
            at += chunk;
        }
        assert dst.position() - start == end64 - address;
    }

    // ---- words ------------------------------------------------------------------------------------

    /** The 8-byte little-endian word at an 8-byte aligned address. */
    long loadLong(long address) {
        checkAligned(address);
        while (true) {
            long entry = resident(address, address + 8, false);
            int frame = frameOf(entry);
            long before = memory.state(frame);
            if ((before & MemoryFile.RECLAIM) == 0) {
                long value = memory.getLongVolatile(frame, (int) (address & (pageSize - 1)));
                if (unchanged(address, entry, frame, before)) {
                    return value;
                }
            }
            Thread.onSpinWait();
        }
    }

    /**
     * The word at {@code address} if its page is resident and the read did not race, without faulting:
     * {@code ifNot} otherwise. What a waiter looks at between sleeps.
     */
    long peekLong(long address, long ifNot) {
        long vpn = address >>> pageShift;
        long entry = table.entry(vpn);
        if (!PageTableFile.present(entry)) {
            return ifNot;
        }
        int frame = frameOf(entry);
        long before = memory.state(frame);
        if ((before & MemoryFile.RECLAIM) != 0) {
            return ifNot;
        }
        long value = memory.getLongVolatile(frame, (int) (address & (pageSize - 1)));
        return unchanged(address, entry, frame, before) ? value : ifNot;
    }

    void storeLong(long address, long value) {
        checkAligned(address);
        int frame = guard(address, address + 8);
        try {
            memory.putLongVolatile(frame, (int) (address & (pageSize - 1)), value);
        } finally {
            memory.releaseGuard(frame, slot, true);
        }
    }

    /** Replaces the word with {@code value} if it is {@code expected}; returns what it was either way. */
    long compareAndSwapLong(long address, long expected, long value) {
        checkAligned(address);
        int frame = guard(address, address + 8);
        long before = expected + 1;
        try {
            before = memory.compareAndExchangeLong(frame, (int) (address & (pageSize - 1)), expected, value);
            return before;
        } finally {
            memory.releaseGuard(frame, slot, before == expected);
        }
    }

    /** Adds to the word; returns what it was. */
    long fetchAddLong(long address, long delta) {
        checkAligned(address);
        int frame = guard(address, address + 8);
        try {
            return memory.getAndAddLong(frame, (int) (address & (pageSize - 1)), delta);
        } finally {
            memory.releaseGuard(frame, slot, true);
        }
    }

    // ---- translation ------------------------------------------------------------------------------

    /**
     * The frame of the page at {@code address}, resident, with its guard held for this CPU; faults the
     * page (and those after it up to {@code end}, in one request) in when it is not resident.
     */
    private int guard(long address, long end) {
        long vpn = address >>> pageShift;
        int spins = 0;
        while (true) {
            long entry = resident(address, end, true);
            int frame = frameOf(entry);
            if (memory.acquireGuard(frame, slot)) {
                if (table.entry(vpn) == entry) {
                    return frame;
                }
                memory.releaseGuard(frame, slot, false);
            }
            // Reclaim has the frame: its entry goes next, then the page faults in again.
            if (++spins < 100) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    /** The page's present entry, after faulting it in (with the pages after it, up to {@code end}) if needed. */
    private long resident(long address, long end, boolean write) {
        long vpn = address >>> pageShift;
        long entry = table.entry(vpn);
        while (!PageTableFile.present(entry)) {
            long page = address & -pageSize;
            faults.fault(page, (int) Math.min(end - page, FaultRecord.MAX_LENGTH), write);
            entry = table.entry(vpn);
        }
        return entry;
    }

    /** After a copy from a frame: whether the page still had that frame throughout (then it is marked accessed). */
    private boolean unchanged(long address, long entry, int frame, long stateBefore) {
        VarHandle.loadLoadFence(); // the copy's reads happen before the second look
        long after = memory.state(frame);
        if (table.entry(address >>> pageShift) != entry || (after & MemoryFile.RECLAIM) != 0
                || MemoryFile.generationOf(after) != MemoryFile.generationOf(stateBefore)) {
            return false;
        }
        memory.markCpuAccessed(frame);
        return true;
    }

    private int frameOf(long entry) {
        int frame = PageTableFile.frameOf(entry);
        if (frame < 0 || frame >= memory.frameCount()) {
            throw new IllegalStateException("the page table names frame " + frame + " of " + memory.frameCount() + ": it is not the node's");
        }
        return frame;
    }

    private static void checkAligned(long address) {
        if ((address & 7) != 0) {
            throw new IllegalArgumentException(String.format("a word access needs an 8-byte aligned address, not 0x%x", address));
        }
    }
}
