package io.pagewire.ring;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * A node's physical memory in one shared-memory file: the frames, the kernel agent's state word of
 * every frame, and the CPU guard word of every frame. The node creates it and owns the state words;
 * an application of the node's user on the same host maps it to reach its pages directly (the
 * state words read-only, the guard words and frames read-write), as a CPU shares a machine's RAM
 * with its NIC.
 *
 * <pre>
 *   file:
 *   0                                       8                   12                  16
 *   +---------------------------------------+-------------------+-------------------+
 *   | magic 0x3130304D454D5750 ("PWMEM001") | page size         | frame count       |
 *   +---------------------------------------+-------------------+-------------------+
 *  16                                      24                                      32
 *   | state words offset (4096)             | guard words offset                    |
 *   +---------------------------------------+---------------------------------------+
 *  32                                      40                                   4096
 *   | frames offset                         | (zero)                                |
 *   +---------------------------------------+---------------------------------------+
 *   | state words: 8 bytes per frame, written by the node only                      |
 *   +-------------------------------------------------------------------------------+ (4096-aligned)
 *   | guard words: 8 bytes per frame, taken and released by CPUs (applications)     |
 *   +-------------------------------------------------------------------------------+ (aligned to
 *   | frames: page size bytes each, frame f at frames offset + f * page size        |  max(4096,
 *   +-------------------------------------------------------------------------------+  page size))
 *
 *   state word (little-endian, node-owned):
 *    63                               32 31        19   18   17   16 15               0
 *   +-----------------------------------+------------+----+----+----+------------------+
 *   |            generation             |   unused   | R  | D  | A  | DMA lock count   |
 *   +-----------------------------------+------------+----+----+----+------------------+
 *     R: the frame is free or being reclaimed; no DMA may lock it and no CPU may copy into it.
 *     D, A: dirty and accessed, set by DMA and by the node's own CPU copies.
 *     generation: advances every time reclaim takes the frame from a page.
 *
 *   guard word (little-endian, written by CPUs with compare-and-swap):
 *    63                                        18   17   16 15                         0
 *   +--------------------------------------------+----+----+----------------------------+
 *   |                  (zero)                    | CD | CA | CPU slot holding the guard |
 *   +--------------------------------------------+----+----+----------------------------+
 *     slot: the session's CPU slot (1..65535) while one of its threads stores into the frame or
 *     runs an atomic on it; 0 when free. CA, CD: accessed and dirty by CPU accesses.
 * </pre>
 *
 * <p>The guard protocol. A CPU that writes takes the guard (compare-and-swap of slot 0 to its own),
 * then reads the state word: if R is set it gives the guard back and retries (the page is going, or
 * gone). Reclaim sets R first, then reads the guard word: if a slot holds it, it abandons the frame
 * (or, to unmap, waits for the slot to let go). Both steps are full fences, so one of the two always
 * sees the other. A CPU that reads takes no guard: it reads the page-table entry and the state word,
 * copies, and reads both again; a changed entry, a set R or a new generation means the copy raced with
 * reclaim and is retried. All words are in the machine's byte order, which must be little-endian.
 */
public final class MemoryFile {
    public static final long MAGIC = 0x31_30_30_4D_45_4D_57_50L; // "PWMEM001" in little-endian bytes
    public static final int HEADER_BYTES = 4096;
    /** Where the header's fields end (the rest of it is zero): what an application reads of it (verbs-c's layout.h). */
    public static final int HEADER_FIELDS_BYTES = 40;

    // ---- state word bits (the node's) ----
    public static final long DMA_COUNT_MASK = 0xFFFFL;
    public static final long ACCESSED = 1L << 16;
    public static final long DIRTY = 1L << 17;
    public static final long RECLAIM = 1L << 18;
    public static final int GENERATION_SHIFT = 32;

    // ---- guard word bits (the CPUs') ----
    public static final long GUARD_SLOT_MASK = 0xFFFFL;
    public static final long CPU_ACCESSED = 1L << 16;
    public static final long CPU_DIRTY = 1L << 17;
    /** The most frames one file holds (its word arrays stay under 2 GiB). */
    public static final int MAX_FRAMES = 1 << 28;
    /** The highest CPU slot number a guard word can hold. */
    public static final int MAX_CPU_SLOT = (int) GUARD_SLOT_MASK;

    /** Each frame mapping holds at most this many bytes (a Java mapping is under 2 GiB); a frame never straddles two. */
    private static final long CHUNK_BYTES = 1L << 30;
    private static final int PAGE_SIZE_OFFSET = 8;
    private static final int FRAME_COUNT_OFFSET = 12;
    private static final int STATES_OFFSET_FIELD = 16;
    private static final int GUARDS_OFFSET_FIELD = 24;
    private static final int FRAMES_OFFSET_FIELD = 32;
    /** How long a CPU waits for another CPU's guard on the same frame before it reports it held. */
    private static final long GUARD_WAIT_LIMIT_NS = 1_000_000_000L;

    private final Path path;
    private final int pageSize;
    private final int pageShift;
    private final int frameCount;
    private final int framesPerChunkShift;
    private final UnsafeBuffer states;
    private final UnsafeBuffer guards;
    private final MappedByteBuffer[] chunks;
    private final UnsafeBuffer[] chunkBuffers;
    private final boolean owner;

    private MemoryFile(Path path, FileChannel file, boolean owner) throws IOException {
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN) {
            throw new UnsupportedOperationException("the memory file's words are little-endian; this machine is not");
        }
        this.path = path;
        this.owner = owner;
        MappedByteBuffer headerMap = file.map(FileChannel.MapMode.READ_ONLY, 0, HEADER_BYTES);
        UnsafeBuffer header = new UnsafeBuffer(headerMap);
        if (header.getLongVolatile(0) != MAGIC) {
            throw new IllegalArgumentException(path + " is not a Pagewire memory file");
        }
        this.pageSize = header.getInt(PAGE_SIZE_OFFSET);
        this.frameCount = header.getInt(FRAME_COUNT_OFFSET);
        long statesAt = header.getLong(STATES_OFFSET_FIELD);
        long guardsAt = header.getLong(GUARDS_OFFSET_FIELD);
        long framesAt = header.getLong(FRAMES_OFFSET_FIELD);
        if (pageSize < 8 || Integer.bitCount(pageSize) != 1 || frameCount <= 0 || frameCount > MAX_FRAMES || statesAt != HEADER_BYTES
                || guardsAt != guardsOffset(frameCount) || framesAt != framesOffset(frameCount, pageSize)
                || file.size() < framesAt + (long) frameCount * pageSize) {
            throw new IllegalArgumentException(path + " has a bad memory file header");
        }
        this.pageShift = Integer.numberOfTrailingZeros(pageSize);
        this.framesPerChunkShift = (int) Math.min(31, Integer.numberOfTrailingZeros((int) CHUNK_BYTES) - pageShift);
        long wordsBytes = 8L * frameCount;
        this.states = new UnsafeBuffer(file.map(owner ? FileChannel.MapMode.READ_WRITE : FileChannel.MapMode.READ_ONLY, statesAt, wordsBytes));
        this.guards = new UnsafeBuffer(file.map(FileChannel.MapMode.READ_WRITE, guardsAt, wordsBytes));
        long totalBytes = (long) frameCount * pageSize;
        long chunkBytes = (long) pageSize << framesPerChunkShift;
        int chunkCount = (int) ((totalBytes + chunkBytes - 1) / chunkBytes);
        this.chunks = new MappedByteBuffer[chunkCount];
        this.chunkBuffers = new UnsafeBuffer[chunkCount];
        for (int i = 0; i < chunkCount; i++) {
            long at = i * chunkBytes;
            chunks[i] = file.map(FileChannel.MapMode.READ_WRITE, framesAt + at, Math.min(chunkBytes, totalBytes - at));
            chunkBuffers[i] = new UnsafeBuffer(chunks[i]);
        }
    }

    /**
     * Creates a node's memory file (zero frames, every frame's state word {@code initialState}).
     *
     * @param path where, or null for an anonymous one (made in the temporary directory and unlinked
     *             at once: off the heap, but mapped by nobody else)
     */
    public static MemoryFile create(Path path, int pageSize, int frameCount, long initialState) {
        if (pageSize < 8 || Integer.bitCount(pageSize) != 1 || frameCount <= 0 || frameCount > MAX_FRAMES) {
            throw new IllegalArgumentException("a memory file needs a power-of-two page size and frames, was " + pageSize + " x " + frameCount);
        }
        boolean anonymous = path == null;
        try {
            Path at = anonymous ? Files.createTempFile(anonymousDirectory(), "pagewire-memory-", ".frames") : path;
            if (anonymous) {
                Files.setPosixFilePermissions(at, PosixFilePermissions.fromString("rw-------"));
            }
            try (FileChannel file = anonymous ? FileChannel.open(at, StandardOpenOption.READ, StandardOpenOption.WRITE) : SharedFiles.createOwnerOnly(at)) {
                long length = framesOffset(frameCount, pageSize) + (long) frameCount * pageSize;
                // A sparse file: frames take memory only once written, as a node's RAM does once used.
                file.write(ByteBuffer.wrap(new byte[] {0}), length - 1);
                MappedByteBuffer headerMap = file.map(FileChannel.MapMode.READ_WRITE, 0, HEADER_BYTES);
                UnsafeBuffer header = new UnsafeBuffer(headerMap);
                header.putInt(PAGE_SIZE_OFFSET, pageSize);
                header.putInt(FRAME_COUNT_OFFSET, frameCount);
                header.putLong(STATES_OFFSET_FIELD, HEADER_BYTES);
                header.putLong(GUARDS_OFFSET_FIELD, guardsOffset(frameCount));
                header.putLong(FRAMES_OFFSET_FIELD, framesOffset(frameCount, pageSize));
                UnsafeBuffer states = new UnsafeBuffer(file.map(FileChannel.MapMode.READ_WRITE, HEADER_BYTES, 8L * frameCount));
                for (int f = 0; f < frameCount; f++) {
                    states.putLong(8 * f, initialState);
                }
                states.putLongVolatile(0, initialState);
                header.putLongVolatile(0, MAGIC);
                MemoryFile memory = new MemoryFile(anonymous ? null : at, file, true);
                if (anonymous) {
                    Files.deleteIfExists(at);
                }
                return memory;
            } catch (IOException | RuntimeException e) {
                Files.deleteIfExists(at);
                throw e;
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create the memory file " + path + ": " + e.getMessage(), e);
        }
    }

    /** Maps an existing memory file (an application's side): state words read-only. */
    public static MemoryFile open(Path path) throws IOException {
        try (FileChannel file = FileChannel.open(path, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            return new MemoryFile(path, file, false);
        }
    }

    private static Path anonymousDirectory() {
        Path shm = Path.of("/dev/shm");
        return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
    }


    static long guardsOffset(int frameCount) {
        return alignUp(HEADER_BYTES + 8L * frameCount, 4096);
    }

    static long framesOffset(int frameCount, int pageSize) {
        return alignUp(guardsOffset(frameCount) + 8L * frameCount, Math.max(4096, pageSize));
    }

    private static long alignUp(long value, long alignment) {
        return (value + alignment - 1) & -alignment;
    }

    /** The file, or null for an anonymous memory. */
    public Path path() {
        return path;
    }

    public int pageSize() {
        return pageSize;
    }

    public int frameCount() {
        return frameCount;
    }

    /** Removes the file (the node's side, when the node stops); mappings stay valid until dropped. */
    public void deleteFile() {
        if (owner && path != null) {
            SharedFiles.deleteQuietly(path);
        }
    }

    // ---- state words ------------------------------------------------------------------------------

    public long state(int frame) {
        return states.getLongVolatile(wordAt(frame));
    }

    /** The node's compare-and-swap of a state word (an application's mapping of them is read-only). */
    public boolean compareAndSetState(int frame, long expected, long value) {
        requireOwner();
        return states.compareAndSetLong(wordAt(frame), expected, value);
    }

    public void setState(int frame, long value) {
        requireOwner();
        states.putLongVolatile(wordAt(frame), value);
    }

    /** The state words are mapped read-only outside the node: a write through that mapping would crash the process. */
    private void requireOwner() {
        if (!owner) {
            throw new IllegalStateException("only the node writes the state words of " + path);
        }
    }

    public static int generationOf(long state) {
        return (int) (state >>> GENERATION_SHIFT);
    }

    // ---- guard words ------------------------------------------------------------------------------

    public long guard(int frame) {
        return guards.getLongVolatile(wordAt(frame));
    }

    public boolean compareAndSetGuard(int frame, long expected, long value) {
        return guards.compareAndSetLong(wordAt(frame), expected, value);
    }

    /** The CPU slot holding a guard word, 0 when free. */
    public static int guardSlot(long guard) {
        return (int) (guard & GUARD_SLOT_MASK);
    }

    /**
     * A CPU's side: takes the frame's guard for {@code slot} and checks the frame is not being
     * reclaimed. Waits while another CPU holds the guard (a copy is short), up to a limit.
     *
     * @return true with the guard held; false (guard not held) when reclaim has the frame
     * @throws IllegalStateException when another slot held the guard past the limit
     */
    public boolean acquireGuard(int frame, int slot) {
        int at = wordAt(frame);
        int spins = 0;
        long since = 0;
        while (true) {
            long g = guards.getLongVolatile(at);
            if ((g & GUARD_SLOT_MASK) == 0) {
                if (guards.compareAndSetLong(at, g, g | slot)) {
                    break;
                }
                continue;
            }
            if (++spins < 100) {
                Thread.onSpinWait();
                continue;
            }
            long now = System.nanoTime();
            if (since == 0) {
                since = now;
            } else if (now - since > GUARD_WAIT_LIMIT_NS) {
                throw new IllegalStateException("frame " + frame + "'s guard has been held by CPU slot " + guardSlot(g) + " for over a second");
            }
            Thread.yield();
        }
        if ((states.getLongVolatile(at) & RECLAIM) != 0) {
            releaseGuard(frame, slot, false);
            return false;
        }
        return true;
    }

    /** A CPU's side: gives the guard back, marking the frame accessed and, if the CPU stored, dirty. */
    public void releaseGuard(int frame, int slot, boolean wrote) {
        int at = wordAt(frame);
        long bits = CPU_ACCESSED | (wrote ? CPU_DIRTY : 0);
        while (true) {
            long g = guards.getLongVolatile(at);
            if ((g & GUARD_SLOT_MASK) != slot) {
                return; // the node took it back (the session ended); nothing is ours to release
            }
            if (guards.compareAndSetLong(at, g, (g & ~GUARD_SLOT_MASK) | bits)) {
                return;
            }
        }
    }

    /** A CPU's side after a read: marks the frame accessed, if it is not marked yet. */
    public void markCpuAccessed(int frame) {
        int at = wordAt(frame);
        long g = guards.getLongVolatile(at);
        if ((g & CPU_ACCESSED) == 0) {
            guards.compareAndSetLong(at, g, g | CPU_ACCESSED);
        }
    }

    // ---- frames -----------------------------------------------------------------------------------

    public void read(int frame, int offset, byte[] dst, int dstOffset, int length) {
        checkRange(frame, offset, length);
        chunkBuffer(frame).getBytes(byteOffset(frame, offset), dst, dstOffset, length);
    }

    public void write(int frame, int offset, byte[] src, int srcOffset, int length) {
        checkRange(frame, offset, length);
        chunkBuffer(frame).putBytes(byteOffset(frame, offset), src, srcOffset, length);
    }

    /** Copies the remaining bytes of {@code src} into a frame, advancing {@code src}'s position. */
    public void write(int frame, int offset, ByteBuffer src) {
        int length = src.remaining();
        checkRange(frame, offset, length);
        chunkBuffer(frame).putBytes(byteOffset(frame, offset), src, src.position(), length);
        src.position(src.position() + length);
    }

    /** Copies {@code length} bytes from a frame into {@code dst} at its position, advancing it. */
    public void read(int frame, int offset, ByteBuffer dst, int length) {
        checkRange(frame, offset, length);
        dst.put(dst.position(), chunks[chunkIndex(frame)], byteOffset(frame, offset), length);
        dst.position(dst.position() + length);
    }

    /** The little-endian word at a frame's 8-byte aligned {@code offset}, read with volatile semantics. */
    public long getLongVolatile(int frame, int offset) {
        return chunkBuffer(frame).getLongVolatile(wordOffset(frame, offset));
    }

    public void putLongVolatile(int frame, int offset, long value) {
        chunkBuffer(frame).putLongVolatile(wordOffset(frame, offset), value);
    }

    public long getAndAddLong(int frame, int offset, long delta) {
        return chunkBuffer(frame).getAndAddLong(wordOffset(frame, offset), delta);
    }

    /** Replaces the word with {@code swap} if it equals {@code compare}; returns its value before either way. */
    public long compareAndExchangeLong(int frame, int offset, long compare, long swap) {
        UnsafeBuffer chunk = chunkBuffer(frame);
        int at = wordOffset(frame, offset);
        while (true) {
            long before = chunk.getLongVolatile(at);
            if (before != compare) {
                return before;
            }
            if (chunk.compareAndSetLong(at, compare, swap)) {
                return compare;
            }
        }
    }

    /**
     * A view of part of a frame (swap I/O reads and writes pages through it). Valid while the caller holds
     * the frame (a pin, a DMA lock, or a frame being reclaimed or filled under the kernel lock).
     */
    public ByteBuffer slice(int frame, int offset, int length) {
        checkRange(frame, offset, length);
        return chunks[chunkIndex(frame)].slice(byteOffset(frame, offset), length);
    }

    public void zero(int frame) {
        chunkBuffer(frame).setMemory(byteOffset(frame, 0), pageSize, (byte) 0);
    }

    private int wordOffset(int frame, int offset) {
        if ((offset & 7) != 0) {
            throw new IllegalArgumentException("an atomic needs an 8-byte aligned offset, was " + offset);
        }
        checkRange(frame, offset, 8);
        return byteOffset(frame, offset);
    }

    private int wordAt(int frame) {
        if (frame < 0 || frame >= frameCount) {
            throw new IndexOutOfBoundsException("frame " + frame + " outside " + frameCount + " frames");
        }
        return 8 * frame;
    }

    private int chunkIndex(int frame) {
        return frame >>> framesPerChunkShift;
    }

    private UnsafeBuffer chunkBuffer(int frame) {
        return chunkBuffers[frame >>> framesPerChunkShift];
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
