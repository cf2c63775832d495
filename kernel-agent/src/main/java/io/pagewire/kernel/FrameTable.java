package io.pagewire.kernel;

import java.util.BitSet;

/**
 * The kernel's book of frames: which page owns each frame (the reverse map), and the free ones.
 * Free frames are handed out in ascending order from where the last one was taken, so the pages a
 * process maps one after another get neighbouring frames: a CPU maps such a run as one mapping of the
 * memory file (the verbs library maps every registered page at its own address, and a process may hold
 * only vm.max_map_count mappings). Guarded by the kernel lock.
 */
final class FrameTable {
    private final PhysicalMemory memory;
    private final SwapDevice swap;
    private final AddressSpace[] owner;
    private final long[] ownerVpn;
    private final PageTableEntry[] ownerEntry;
    private final BitSet free;
    private int freeCount;
    /** Where the search for the next free frame starts: just after the last one taken. */
    private int cursor;

    FrameTable(PhysicalMemory memory, SwapDevice swap) {
        this.memory = memory;
        this.swap = swap;
        int n = memory.frameCount();
        this.owner = new AddressSpace[n];
        this.ownerVpn = new long[n];
        this.ownerEntry = new PageTableEntry[n];
        this.free = new BitSet(n);
        free.set(0, n);
        freeCount = n;
    }

    int frameCount() {
        return owner.length;
    }

    int freeCount() {
        return freeCount;
    }

    /** A free frame, or -1. The frame is still marked reclaiming until {@link #attach}. */
    int takeFree() {
        if (freeCount == 0) {
            return -1;
        }
        int frame = free.nextSetBit(cursor);
        if (frame < 0) {
            frame = free.nextSetBit(0);
        }
        free.clear(frame);
        freeCount--;
        cursor = frame + 1;
        return frame;
    }

    void putFree(int frame) {
        detach(frame);
        free.set(frame);
        freeCount++;
    }

    /** Forgets which page owned the frame; reclaim hands it straight to the page that needed one. */
    void detach(int frame) {
        owner[frame] = null;
        ownerEntry[frame] = null;
    }

    void attach(int frame, AddressSpace space, long vpn, PageTableEntry entry) {
        owner[frame] = space;
        ownerVpn[frame] = vpn;
        ownerEntry[frame] = entry;
    }

    AddressSpace owner(int frame) {
        return owner[frame];
    }

    long ownerVpn(int frame) {
        return ownerVpn[frame];
    }

    PageTableEntry ownerEntry(int frame) {
        return ownerEntry[frame];
    }

    int pinCount(int frame) {
        PageTableEntry entry = ownerEntry[frame];
        return entry == null ? 0 : entry.pinCount;
    }

    /**
     * Whether reclaim may take this frame now: it holds a page, no pin, DMA or CPU copy holds it, and its
     * contents can go somewhere (it is clean, or a swap slot is there for it).
     */
    boolean isEvictable(int frame) {
        PageTableEntry entry = ownerEntry[frame];
        if (entry == null || entry.pinCount > 0 || memory.isReclaiming(frame) || memory.isHeld(frame)) {
            return false;
        }
        if (entry.cpuMapped) {
            owner[frame].wantCpuUnmap(ownerVpn[frame], entry);
            return false;
        }
        return !needsNewSwapSlot(frame, entry) || !swap.isFull();
    }

    /** A dirty page without a slot needs one to be evicted; a clean page is dropped or already in swap. */
    boolean needsNewSwapSlot(int frame, PageTableEntry entry) {
        return memory.isDirty(frame) && entry.swapSlot < 0;
    }

    boolean testAndClearAccessed(int frame) {
        return memory.testAndClearAccessed(frame);
    }
}
