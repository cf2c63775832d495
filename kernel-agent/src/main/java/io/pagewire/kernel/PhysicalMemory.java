package io.pagewire.kernel;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The node's physical memory: frames of one page each, in large byte arrays on the Java heap (so a
 * packet payload can wrap a frame's bytes without a copy, and the transport copies them once, straight
 * into its socket buffers), and beside every frame the
 * state word that the DMA engine and the page reclaimer share without taking the kernel's lock.
 *
 * <pre>
 *  63                               32 31        19   18   17   16 15               0
 * +-----------------------------------+------------+----+----+----+------------------+
 * |            generation             |   unused   | R  | D  | A  | DMA lock count   |
 * +-----------------------------------+------------+----+----+----+------------------+
 *   R: the frame is free or being reclaimed; no DMA may lock it.
 *   D, A: dirty and accessed, set by CPU stores and DMA like an MMU sets them in a PTE.
 *   generation: advances every time the frame is taken from a page; a translation carries the
 *   generation it saw, so a DMA through a translation that raced with reclaim is refused.
 * </pre>
 */
public final class PhysicalMemory {
    private static final long COUNT_MASK = 0xFFFFL;
    private static final long ACCESSED = 1L << 16;
    private static final long DIRTY = 1L << 17;
    private static final long RECLAIM = 1L << 18;
    private static final int GENERATION_SHIFT = 32;
    /** Chunks keep every array under 2 GiB; a frame never straddles two. */
    private static final int CHUNK_BYTES = 1 << 30;

    private final int pageSize;
    private final int pageShift;
    private final int frameCount;
    private final int framesPerChunkShift;
    private final ByteBuffer[] chunks;
    private final AtomicLongArray state;
    private final KernelCounters counters;

    PhysicalMemory(int pageSize, int frameCount, KernelCounters counters) {
        this.counters = counters;
        this.pageSize = pageSize;
        this.pageShift = Integer.numberOfTrailingZeros(pageSize);
        this.frameCount = frameCount;
        this.framesPerChunkShift = Integer.numberOfTrailingZeros(CHUNK_BYTES) - pageShift;
        long totalBytes = (long) frameCount * pageSize;
        int chunkCount = (int) ((totalBytes + CHUNK_BYTES - 1) / CHUNK_BYTES);
        this.chunks = new ByteBuffer[chunkCount];
        for (int i = 0; i < chunkCount; i++) {
            long remaining = totalBytes - (long) i * CHUNK_BYTES;
            chunks[i] = ByteBuffer.allocate((int) Math.min(CHUNK_BYTES, remaining));
        }
        this.state = new AtomicLongArray(frameCount);
        for (int f = 0; f < frameCount; f++) {
            state.set(f, RECLAIM);
        }
    }

    public int pageSize() {
        return pageSize;
    }

    public int frameCount() {
        return frameCount;
    }

    // ---- DMA locking: what the NIC does around every per-page copy --------------------------

    /**
     * Locks a frame for one DMA if it still holds the page the translation was made for.
     *
     * @return false when the frame was reclaimed since the translation was made (stale translation)
     */
    public boolean tryLockForDma(int frame, int generation) {
        while (true) {
            long s = state.get(frame);
            if ((s & RECLAIM) != 0 || generationOf(s) != generation) {
                counters.increment(KernelCounter.STALE_TRANSLATIONS);
                return false;
            }
            if ((s & COUNT_MASK) == COUNT_MASK) {
                throw new IllegalStateException("frame " + frame + " has " + COUNT_MASK + " DMA locks: a DMA lock is leaking");
            }
            if (state.compareAndSet(frame, s, s + 1)) {
                return true;
            }
        }
    }

    /** Ends a DMA on the frame, setting its accessed bit and, if the DMA wrote, its dirty bit. */
    public void unlockDma(int frame, boolean wrote) {
        long bits = ACCESSED | (wrote ? DIRTY : 0);
        while (true) {
            long s = state.get(frame);
            if ((s & COUNT_MASK) == 0) {
                throw new IllegalStateException("frame " + frame + " is not locked for DMA");
            }
            if (state.compareAndSet(frame, s, (s - 1) | bits)) {
                return;
            }
        }
    }

    /** How many DMAs hold the frame right now. */
    public int dmaLockCount(int frame) {
        return (int) (state.get(frame) & COUNT_MASK);
    }

    /** The frame's current generation: what a translation made now would carry. */
    public int generation(int frame) {
        return generationOf(state.get(frame));
    }

    // ---- data ---------------------------------------------------------------------------------

    /** Copies bytes out of a frame. */
    public void read(int frame, int offset, byte[] dst, int dstOffset, int length) {
        checkRange(frame, offset, length);
        chunkOf(frame).get(byteOffset(frame, offset), dst, dstOffset, length);
    }

    /** Copies bytes into a frame. */
    public void write(int frame, int offset, byte[] src, int srcOffset, int length) {
        checkRange(frame, offset, length);
        chunkOf(frame).put(byteOffset(frame, offset), src, srcOffset, length);
    }

    /** Copies the remaining bytes of {@code src} into a frame, advancing {@code src}'s position. */
    public void write(int frame, int offset, ByteBuffer src) {
        int length = src.remaining();
        checkRange(frame, offset, length);
        chunkOf(frame).put(byteOffset(frame, offset), src, src.position(), length);
        src.position(src.position() + length);
    }

    /** Copies {@code length} bytes from a frame into {@code dst} at its position, advancing it. */
    public void read(int frame, int offset, ByteBuffer dst, int length) {
        checkRange(frame, offset, length);
        dst.put(dst.position(), chunkOf(frame), byteOffset(frame, offset), length);
        dst.position(dst.position() + length);
    }

    /**
     * Adds to the little-endian 8-byte word at a frame's {@code offset} atomically (against every other
     * atomic on the frame) and returns its value before: a NIC's FETCH_ADD. Only under a DMA lock; the
     * offset must be 8-byte aligned.
     */
    public long getAndAddLong(int frame, int offset, long delta) {
        return (long) WORD.getAndAdd(array(frame), atomicIndex(frame, offset), delta);
    }

    /**
     * Replaces the little-endian 8-byte word at a frame's {@code offset} with {@code swap} if it equals
     * {@code compare}, atomically, and returns its value before either way: a NIC's COMPARE_SWAP.
     */
    public long compareAndExchangeLong(int frame, int offset, long compare, long swap) {
        return (long) WORD.compareAndExchange(array(frame), atomicIndex(frame, offset), compare, swap);
    }

    private static final VarHandle WORD = MethodHandles.byteArrayViewVarHandle(long[].class,
            ByteOrder.LITTLE_ENDIAN);

    private int atomicIndex(int frame, int offset) {
        if ((offset & 7) != 0) {
            throw new IllegalArgumentException("an atomic needs an 8-byte aligned offset, was " + offset);
        }
        checkRange(frame, offset, 8);
        return arrayOffset(frame, offset);
    }

    /**
     * The array that holds a frame's bytes, for wrapping them without a copy (a packet payload); the
     * frame's byte {@code offset} is at {@link #arrayOffset}. Only under a DMA lock, and never written.
     */
    public byte[] array(int frame) {
        return chunkOf(frame).array();
    }

    /** Where a frame's byte {@code offset} is in its {@link #array}. */
    public int arrayOffset(int frame, int offset) {
        checkRange(frame, offset, 0);
        return chunkOf(frame).arrayOffset() + byteOffset(frame, offset);
    }

    /**
     * A read-only view of part of a frame. The view is only valid while the caller holds the frame (a
     * pin or a DMA lock). (Not for packet payloads: protobuf copies a read-only buffer it wraps.)
     */
    public ByteBuffer view(int frame, int offset, int length) {
        checkRange(frame, offset, length);
        return chunkOf(frame).slice(byteOffset(frame, offset), length).asReadOnlyBuffer();
    }

    /**
     * Drops the frames' memory (to the garbage collector). Only after every address
     * space closed (so every DMA drained and no frame can be locked again).
     */
    void free() {
        Arrays.fill(chunks, null);
    }

    void zero(int frame) {
        ByteBuffer chunk = chunkOf(frame);
        int base = byteOffset(frame, 0);
        for (int i = 0; i < pageSize; i += 8) {
            chunk.putLong(base + i, 0L);
        }
    }

    void writeTo(FileChannel channel, long position, int frame) throws IOException {
        ByteBuffer page = chunkOf(frame).slice(byteOffset(frame, 0), pageSize);
        while (page.hasRemaining()) {
            channel.write(page, position + page.position());
        }
    }

    void readFrom(FileChannel channel, long position, int frame) throws IOException {
        ByteBuffer page = chunkOf(frame).slice(byteOffset(frame, 0), pageSize);
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
     * Starts reclaiming a frame if no DMA holds it: sets R and advances the generation in one step,
     * so no DMA can lock it afterwards through any earlier translation.
     */
    boolean tryBeginReclaim(int frame) {
        long s = state.get(frame);
        if ((s & (RECLAIM | COUNT_MASK)) != 0) {
            return false;
        }
        return state.compareAndSet(frame, s, nextGeneration(s) | RECLAIM);
    }

    /** Starts reclaiming a frame whatever DMA holds it; the caller then waits for the drain. */
    void beginReclaim(int frame) {
        while (true) {
            long s = state.get(frame);
            if ((s & RECLAIM) != 0) {
                return;
            }
            if (state.compareAndSet(frame, s, nextGeneration(s) | RECLAIM)) {
                return;
            }
        }
    }

    /** Gives a frame whose reclaim was started back to its page (the reclaim was abandoned). */
    void abandonReclaim(int frame) {
        while (true) {
            long s = state.get(frame);
            if (state.compareAndSet(frame, s, s & ~RECLAIM)) {
                return;
            }
        }
    }

    /** Hands a free frame to a page: DMA may lock it again, at the generation it now has. */
    void assign(int frame, boolean dirty) {
        long s = state.get(frame);
        if ((s & RECLAIM) == 0 || (s & COUNT_MASK) != 0) {
            throw new IllegalStateException("frame " + frame + " is not free");
        }
        state.set(frame, (s & ~(RECLAIM | DIRTY)) | ACCESSED | (dirty ? DIRTY : 0));
    }

    boolean isReclaiming(int frame) {
        return (state.get(frame) & RECLAIM) != 0;
    }

    boolean isDirty(int frame) {
        return (state.get(frame) & DIRTY) != 0;
    }

    /** Clears the dirty bit after the page was written back. */
    void clearDirty(int frame) {
        while (true) {
            long s = state.get(frame);
            if (state.compareAndSet(frame, s, s & ~DIRTY)) {
                return;
            }
        }
    }

    /** Sets accessed and, for a write, dirty: what a CPU access does. */
    void markAccessed(int frame, boolean write) {
        long bits = ACCESSED | (write ? DIRTY : 0);
        while (true) {
            long s = state.get(frame);
            if ((s & bits) == bits || state.compareAndSet(frame, s, s | bits)) {
                return;
            }
        }
    }

    /** Clears the accessed bit and says whether it was set: CLOCK's second chance. */
    boolean testAndClearAccessed(int frame) {
        while (true) {
            long s = state.get(frame);
            if ((s & ACCESSED) == 0) {
                return false;
            }
            if (state.compareAndSet(frame, s, s & ~ACCESSED)) {
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

    private ByteBuffer chunkOf(int frame) {
        return chunks[frame >>> framesPerChunkShift];
    }

    private int byteOffset(int frame, int offset) {
        int frameInChunk = frame & ((1 << framesPerChunkShift) - 1);
        return (frameInChunk << pageShift) + offset;
    }

    private void checkRange(int frame, int offset, int length) {
        if (frame < 0 || frame >= frameCount || offset < 0 || length < 0 || offset + length > pageSize) {
            throw new IndexOutOfBoundsException("frame " + frame + " offset " + offset + " length " + length
                    + " outside one page of " + pageSize + " bytes in " + frameCount + " frames");
        }
    }
}
