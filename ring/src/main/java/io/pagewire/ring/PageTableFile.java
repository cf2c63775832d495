package io.pagewire.ring;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * One address space's page table as the CPUs see it: a flat array of entries in a shared-memory file,
 * one per virtual page from the space's first address, which the kernel agent writes as pages come
 * and go and an application maps read-only to translate its own addresses to frames of the
 * {@link MemoryFile}. The kernel's own page table (a radix tree on the heap) stays the truth; this
 * is its CPU-visible mirror, as a hardware walker reads tables the kernel writes.
 *
 * <pre>
 *   file:
 *   0                                       8                   12                  16
 *   +---------------------------------------+-------------------+-------------------+
 *   | magic 0x3130454741505750 ("PWPAGE01") | address space id  | page shift        |
 *   +---------------------------------------+-------------------+-------------------+
 *  16                                      24                                      32
 *   | first virtual page number             | entry count                           |
 *   +---------------------------------------+---------------------------------------+
 *  32                                                                              64
 *   | (zero)                                                                        |
 *   +-------------------------------------------------------------------------------+
 *  64
 *   | entries: 8 bytes each, the entry of page (first + i) at 64 + 8 * i            |
 *   +-------------------------------------------------------------------------------+
 *
 *   entry (little-endian):
 *    63  62                                 32 31                                   0
 *   +---+-------------------------------------+--------------------------------------+
 *   | P |              (zero)                 |                frame                 |
 *   +---+-------------------------------------+--------------------------------------+
 *     P: the page is resident in that frame. An entry without P (all zero) is a CPU fault:
 *     the page is not allocated, never touched, swapped out or going.
 * </pre>
 *
 * <p>Pages past the entry count are not visible to CPUs; an application reaches them through the
 * node's calls instead.
 */
public final class PageTableFile {
    public static final long MAGIC = 0x31_30_45_47_41_50_57_50L; // "PWPAGE01" in little-endian bytes
    public static final int HEADER_BYTES = 64;
    public static final long PRESENT = 1L << 63;
    private static final long FRAME_MASK = 0xFFFF_FFFFL;

    private final Path path;
    private final int spaceId;
    private final int pageShift;
    private final long firstVpn;
    private final long entryCount;
    private final UnsafeBuffer entries;
    /** Whether this is the node's writable mapping (an application's is read-only: a write would crash it). */
    private final boolean writable;

    private PageTableFile(Path path, MappedByteBuffer mapped) {
        this.path = path;
        this.writable = !mapped.isReadOnly();
        UnsafeBuffer header = new UnsafeBuffer(mapped, 0, HEADER_BYTES);
        if (header.getLongVolatile(0) != MAGIC) {
            throw new IllegalArgumentException(path + " is not a Pagewire page-table file");
        }
        this.spaceId = header.getInt(8);
        this.pageShift = header.getInt(12);
        this.firstVpn = header.getLong(16);
        this.entryCount = header.getLong(24);
        if (pageShift < 3 || pageShift > 30 || firstVpn < 0 || entryCount <= 0 || HEADER_BYTES + 8 * entryCount > mapped.capacity()) {
            throw new IllegalArgumentException(path + " has a bad page-table header");
        }
        this.entries = new UnsafeBuffer(mapped, HEADER_BYTES, (int) (8 * entryCount));
    }

    /** The file's size for {@code entryCount} entries. */
    public static long fileBytes(long entryCount) {
        return HEADER_BYTES + 8 * entryCount;
    }

    /** Creates an address space's table (the node's side), every entry empty. */
    public static PageTableFile create(Path path, int spaceId, int pageShift, long firstVpn, long entryCount) {
        if (entryCount <= 0 || fileBytes(entryCount) > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a page-table file holds 1 to " + ((Integer.MAX_VALUE - HEADER_BYTES) / 8) + " entries, not " + entryCount);
        }
        try (FileChannel file = SharedFiles.createOwnerOnly(path)) {
            MappedByteBuffer mapped = file.map(FileChannel.MapMode.READ_WRITE, 0, fileBytes(entryCount));
            UnsafeBuffer header = new UnsafeBuffer(mapped, 0, HEADER_BYTES);
            header.putInt(8, spaceId);
            header.putInt(12, pageShift);
            header.putLong(16, firstVpn);
            header.putLong(24, entryCount);
            header.putLongVolatile(0, MAGIC);
            // Read-only from here on for everyone but the node's open mapping: applications map it so.
            Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("r--------"));
            return new PageTableFile(path, mapped);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create the page-table file " + path + ": " + e.getMessage(), e);
        }
    }

    /** Maps an address space's table read-only (an application's side). */
    public static PageTableFile open(Path path) throws IOException {
        try (FileChannel file = FileChannel.open(path, StandardOpenOption.READ)) {
            return new PageTableFile(path, file.map(FileChannel.MapMode.READ_ONLY, 0, file.size()));
        }
    }

    public Path path() {
        return path;
    }

    public int spaceId() {
        return spaceId;
    }

    public int pageShift() {
        return pageShift;
    }

    /** Whether the CPUs see page {@code vpn} through this table. */
    public boolean covers(long vpn) {
        return vpn - firstVpn >= 0 && vpn - firstVpn < entryCount;
    }

    /** A page's entry (0 when not present); the page must be {@link #covers covered}. */
    public long entry(long vpn) {
        return entries.getLongVolatile((int) (8 * (vpn - firstVpn)));
    }

    public static boolean present(long entry) {
        return (entry & PRESENT) != 0;
    }

    public static int frameOf(long entry) {
        return (int) (entry & FRAME_MASK);
    }

    /** The node's side: page {@code vpn} is resident in {@code frame}. Pages not covered are ignored. */
    public void map(long vpn, int frame) {
        requireWritable();
        if (covers(vpn)) {
            entries.putLongVolatile((int) (8 * (vpn - firstVpn)), PRESENT | (frame & FRAME_MASK));
        }
    }

    /** The node's side: page {@code vpn} is no longer resident. */
    public void unmap(long vpn) {
        requireWritable();
        if (covers(vpn)) {
            entries.putLongVolatile((int) (8 * (vpn - firstVpn)), 0L);
        }
    }

    private void requireWritable() {
        if (!writable) {
            throw new IllegalStateException("only the node writes the page table " + path);
        }
    }

    /** Removes the file (the node's side, when the address space closes); mappings stay valid until dropped. */
    public void deleteFile() {
        SharedFiles.deleteQuietly(path);
    }
}
