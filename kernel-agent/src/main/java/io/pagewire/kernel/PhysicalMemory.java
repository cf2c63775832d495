package io.pagewire.kernel;

import io.pagewire.ring.MemoryFile;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.util.BitSet;

/**
 * The node's physical memory: frames of one page each in a shared-memory file off the Java heap
 * ({@link MemoryFile}, which draws the layout), and beside every frame the state word that the DMA
 * engine and the page reclaimer share without taking the kernel's lock, and the guard word that
 * applications on the node's host take while they store into a frame (they are the machine's CPUs).
 * Reclaim leaves a frame alone while either a DMA lock or a CPU guard holds it.
 */
public final class PhysicalMemory {
    private static final long COUNT_MASK = MemoryFile.DMA_COUNT_MASK;
    private static final long ACCESSED = MemoryFile.ACCESSED;
    private static final long DIRTY = MemoryFile.DIRTY;
    private static final long RECLAIM = MemoryFile.RECLAIM;
    private static final int GENERATION_SHIFT = MemoryFile.GENERATION_SHIFT;

    private final int pageSize;
    private final int frameCount;
    private final MemoryFile file;
    private final KernelCounters counters;
    /** CPU slots handed to sessions that map the memory; a guard held by any other slot is not honoured. */
    private final BitSet cpuSlots = new BitSet();

    /**
     * @param path the memory file to create, or null for an anonymous one (nobody else maps it)
     */
    PhysicalMemory(int pageSize, int frameCount, Path path, KernelCounters counters) {
        this.counters = counters;
        this.pageSize = pageSize;
        this.frameCount = frameCount;
        this.file = MemoryFile.create(path, pageSize, frameCount, RECLAIM);
    }

    public int pageSize() {
        return pageSize;
    }

    public int frameCount() {
        return frameCount;
    }

    /** The memory file applications on the host map, or null when it is anonymous. */
    public Path path() {
        return file.path();
    }

    // ---- DMA locking: what the NIC does around every per-page copy --------------------------

    /**
     * Locks a frame for one DMA if it still holds the page the translation was made for.
     *
     * @return false when the frame was reclaimed since the translation was made (stale translation)
     */
    public boolean tryLockForDma(int frame, int generation) {
        while (true) {
            long s = file.state(frame);
            if ((s & RECLAIM) != 0 || generationOf(s) != generation) {
                counters.increment(KernelCounter.STALE_TRANSLATIONS);
                return false;
            }
            if ((s & COUNT_MASK) == COUNT_MASK) {
                throw new IllegalStateException("frame " + frame + " has " + COUNT_MASK + " DMA locks: a DMA lock is leaking");
            }
            if (file.compareAndSetState(frame, s, s + 1)) {
                return true;
            }
        }
    }

    /** Ends a DMA on the frame, setting its accessed bit and, if the DMA wrote, its dirty bit. */
    public void unlockDma(int frame, boolean wrote) {
        long bits = ACCESSED | (wrote ? DIRTY : 0);
        while (true) {
            long s = file.state(frame);
            if ((s & COUNT_MASK) == 0) {
                throw new IllegalStateException("frame " + frame + " is not locked for DMA");
            }
            if (file.compareAndSetState(frame, s, (s - 1) | bits)) {
                return;
            }
        }
    }

    /** How many DMAs hold the frame right now. */
    public int dmaLockCount(int frame) {
        return (int) (file.state(frame) & COUNT_MASK);
    }

    /** The frame's current generation: what a translation made now would carry. */
    public int generation(int frame) {
        return generationOf(file.state(frame));
    }

    // ---- CPUs: applications that map the memory ------------------------------------------------

    /** A CPU slot for a session that maps the memory: the value its guards hold. */
    public synchronized int openCpuSlot() {
        int slot = cpuSlots.nextClearBit(1);
        if (slot > MemoryFile.MAX_CPU_SLOT) {
            throw new KernelException("no CPU slot left: " + MemoryFile.MAX_CPU_SLOT + " sessions map the node's memory");
        }
        cpuSlots.set(slot);
        return slot;
    }

    /**
     * The session of a CPU slot ended: every guard it still holds (a process killed in a copy) is
     * taken back, its frame marked dirty (the copy may have changed it), and the slot is free again.
     *
     * @return how many guards were taken back
     */
    public int closeCpuSlot(int slot) {
        int released = 0;
        for (int f = 0; f < frameCount; f++) {
            long g = file.guard(f);
            if (MemoryFile.guardSlot(g) == slot && takeGuardBack(f, g)) {
                released++;
            }
        }
        synchronized (this) {
            cpuSlots.clear(slot);
        }
        counters.add(KernelCounter.CPU_GUARDS_TAKEN_BACK, released);
        return released;
    }

    /** Takes a frame's guard back from whichever CPU holds it (the page is being freed); counted. */
    void takeGuardBack(int frame) {
        while (true) {
            long g = file.guard(frame);
            if (MemoryFile.guardSlot(g) == 0) {
                return;
            }
            if (takeGuardBack(frame, g)) {
                counters.increment(KernelCounter.CPU_GUARDS_TAKEN_BACK);
                return;
            }
        }
    }

    private synchronized boolean isOpenCpuSlot(int slot) {
        return cpuSlots.get(slot);
    }

    /** Clears a guard's slot (keeping its bits, and marking the frame dirty); false if the word changed meanwhile. */
    private boolean takeGuardBack(int frame, long guard) {
        return file.compareAndSetGuard(frame, guard, (guard & ~MemoryFile.GUARD_SLOT_MASK) | MemoryFile.CPU_ACCESSED | MemoryFile.CPU_DIRTY);
    }

    /**
     * Whether a CPU holds the frame's guard. A guard word naming no open slot (written by a broken
     * application, or left by one whose slot closed) is not honoured: it is cleared and counted.
     */
    private boolean cpuHolds(int frame) {
        while (true) {
            long g = file.guard(frame);
            int slot = MemoryFile.guardSlot(g);
            if (slot == 0) {
                return false;
            }
            if (isOpenCpuSlot(slot)) {
                return true;
            }
            if (takeGuardBack(frame, g)) {
                counters.increment(KernelCounter.CPU_GUARDS_TAKEN_BACK);
                return false;
            }
        }
    }

    /** Whether a DMA lock or a CPU guard holds the frame: reclaim must wait for it to drain. */
    public boolean isHeld(int frame) {
        return dmaLockCount(frame) > 0 || cpuHolds(frame);
    }

    // ---- data ---------------------------------------------------------------------------------

    /** Copies bytes out of a frame. */
    public void read(int frame, int offset, byte[] dst, int dstOffset, int length) {
        file.read(frame, offset, dst, dstOffset, length);
    }

    /** Copies bytes into a frame. */
    public void write(int frame, int offset, byte[] src, int srcOffset, int length) {
        file.write(frame, offset, src, srcOffset, length);
    }

    /** Copies the remaining bytes of {@code src} into a frame, advancing {@code src}'s position. */
    public void write(int frame, int offset, ByteBuffer src) {
        file.write(frame, offset, src);
    }

    /** Copies {@code length} bytes from a frame into {@code dst} at its position, advancing it. */
    public void read(int frame, int offset, ByteBuffer dst, int length) {
        file.read(frame, offset, dst, length);
    }

    /**
     * Adds to the little-endian 8-byte word at a frame's {@code offset} atomically (against every other
     * atomic on the frame, a CPU's included) and returns its value before: a NIC's FETCH_ADD. Only
     * under a DMA lock; the offset must be 8-byte aligned.
     */
    public long getAndAddLong(int frame, int offset, long delta) {
        return file.getAndAddLong(frame, offset, delta);
    }

    /**
     * Replaces the little-endian 8-byte word at a frame's {@code offset} with {@code swap} if it equals
     * {@code compare}, atomically, and returns its value before either way: a NIC's COMPARE_SWAP.
     */
    public long compareAndExchangeLong(int frame, int offset, long compare, long swap) {
        return file.compareAndExchangeLong(frame, offset, compare, swap);
    }

    /**
     * A read-only view of part of a frame. The view is only valid while the caller holds the frame (a
     * pin or a DMA lock). (Not for packet payloads: protobuf copies a read-only buffer it wraps.)
     */
    public ByteBuffer view(int frame, int offset, int length) {
        return file.slice(frame, offset, length).asReadOnlyBuffer();
    }

    /**
     * Removes the memory file. Only after every address space closed (so every DMA drained and no
     * frame can be locked again); the mapping itself goes with the last reference to it.
     */
    void free() {
        file.deleteFile();
    }

    void zero(int frame) {
        file.zero(frame);
    }

    void writeTo(FileChannel channel, long position, int frame) throws IOException {
        ByteBuffer page = file.slice(frame, 0, pageSize);
        while (page.hasRemaining()) {
            channel.write(page, position + page.position());
        }
    }

    void readFrom(FileChannel channel, long position, int frame) throws IOException {
        ByteBuffer page = file.slice(frame, 0, pageSize);
        while (page.hasRemaining()) {
            int n = channel.read(page, position + page.position());
            if (n < 0) {
                // A slot past the end of a sparse file reads as zeros.
                while (page.hasRemaining()) {
                    page.put((byte) 0);
                }
            }
        }
    }

    // ---- the kernel's side of the state word (always under the kernel lock) ------------------

    /**
     * Starts reclaiming a frame if no DMA and no CPU holds it: sets R and advances the generation in
     * one step, so no DMA can lock it afterwards through any earlier translation, then looks at the
     * CPU guard (R first, guard second: the other half of {@link MemoryFile}'s guard protocol).
     */
    boolean tryBeginReclaim(int frame) {
        long s = file.state(frame);
        if ((s & (RECLAIM | COUNT_MASK)) != 0) {
            return false;
        }
        if (!file.compareAndSetState(frame, s, nextGeneration(s) | RECLAIM)) {
            return false;
        }
        if (cpuHolds(frame)) {
            abandonReclaim(frame);
            return false;
        }
        return true;
    }

    /** Starts reclaiming a frame whatever DMA or CPU holds it; the caller then waits for the drain. */
    void beginReclaim(int frame) {
        while (true) {
            long s = file.state(frame);
            if ((s & RECLAIM) != 0) {
                return;
            }
            if (file.compareAndSetState(frame, s, nextGeneration(s) | RECLAIM)) {
                return;
            }
        }
    }

    /** Gives a frame whose reclaim was started back to its page (the reclaim was abandoned). */
    void abandonReclaim(int frame) {
        while (true) {
            long s = file.state(frame);
            if (file.compareAndSetState(frame, s, s & ~RECLAIM)) {
                return;
            }
        }
    }

    /** Hands a free frame to a page: DMA may lock it again, at the generation it now has. */
    void assign(int frame, boolean dirty) {
        long s = file.state(frame);
        if ((s & RECLAIM) == 0 || (s & COUNT_MASK) != 0) {
            throw new IllegalStateException("frame " + frame + " is not free");
        }
        clearGuardBits(frame, MemoryFile.CPU_ACCESSED | MemoryFile.CPU_DIRTY);
        file.setState(frame, (s & ~(RECLAIM | DIRTY)) | ACCESSED | (dirty ? DIRTY : 0));
    }

    boolean isReclaiming(int frame) {
        return (file.state(frame) & RECLAIM) != 0;
    }

    /** Dirty by DMA or by the node's copies (state word), or by a CPU's store (guard word). */
    boolean isDirty(int frame) {
        return (file.state(frame) & DIRTY) != 0 || (file.guard(frame) & MemoryFile.CPU_DIRTY) != 0;
    }

    /** Clears the dirty bits after the page was written back. */
    void clearDirty(int frame) {
        clearGuardBits(frame, MemoryFile.CPU_DIRTY);
        while (true) {
            long s = file.state(frame);
            if (file.compareAndSetState(frame, s, s & ~DIRTY)) {
                return;
            }
        }
    }

    /** Sets accessed and, for a write, dirty: what a CPU access does. */
    void markAccessed(int frame, boolean write) {
        long bits = ACCESSED | (write ? DIRTY : 0);
        while (true) {
            long s = file.state(frame);
            if ((s & bits) == bits || file.compareAndSetState(frame, s, s | bits)) {
                return;
            }
        }
    }

    /** Clears the accessed bits and says whether one was set: CLOCK's second chance. */
    boolean testAndClearAccessed(int frame) {
        boolean byCpu = clearGuardBits(frame, MemoryFile.CPU_ACCESSED);
        while (true) {
            long s = file.state(frame);
            if ((s & ACCESSED) == 0) {
                return byCpu;
            }
            if (file.compareAndSetState(frame, s, s & ~ACCESSED)) {
                return true;
            }
        }
    }

    /** Clears bits of a guard word (a CPU may hold it meanwhile); says whether any was set. */
    private boolean clearGuardBits(int frame, long bits) {
        while (true) {
            long g = file.guard(frame);
            if ((g & bits) == 0) {
                return false;
            }
            if (file.compareAndSetGuard(frame, g, g & ~bits)) {
                return true;
            }
        }
    }

    private static int generationOf(long s) {
        return (int) (s >>> GENERATION_SHIFT);
    }

    private static long nextGeneration(long s) {
        long generation = (s >>> GENERATION_SHIFT) + 1;
        return (generation << GENERATION_SHIFT) | (s & ((1L << GENERATION_SHIFT) - 1));
    }
}
