package io.pagewire.kernel;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Which virtual addresses of one address space are reserved: its allocations (start to page-rounded
 * length), where the next one goes, and how many bytes they hold. Bookkeeping only, with no pages or
 * frames: the {@link AddressSpace} that owns it calls it with the kernel lock held and deals with the
 * pages of what it reserves and frees.
 */
final class AllocationMap {
    private final TreeMap<Long, Long> allocations = new TreeMap<>();
    private final int pageSize;
    private final int pageShift;
    private long nextAddress = AddressSpace.FIRST_ADDRESS;
    private long bytes;

    AllocationMap(int pageSize) {
        this.pageSize = pageSize;
        this.pageShift = Integer.numberOfTrailingZeros(pageSize);
    }

    /** The bytes reserved. */
    long bytes() {
        return bytes;
    }

    /**
     * Reserves {@code length} bytes rounded up to whole pages after the last allocation, an unmapped
     * guard page after them, and returns where they start.
     *
     * @param owner what the refusal names
     * @throws KernelException when the address space has no room left
     */
    long reserve(long length, Object owner) {
        long rounded = ((length + pageSize - 1) >>> pageShift) << pageShift;
        long left = AddressSpace.END_ADDRESS - nextAddress - pageSize;
        if (length > AddressSpace.END_ADDRESS || rounded > left) {
            throw new KernelException("cannot allocate " + ByteSizes.format(length) + ": only " + ByteSizes.format(Math.max(0, left))
                    + " of virtual address space left in " + owner);
        }
        long address = nextAddress;
        allocations.put(address, rounded);
        nextAddress = address + rounded + pageSize;
        bytes += rounded;
        return address;
    }

    /**
     * Reserves exactly [address, address + length) (page-aligned, checked by the caller); an allocation
     * the range overlaps or touches joins it.
     *
     * @return the bytes newly reserved
     */
    long reserveAt(long address, long length) {
        long start = address;
        long end = address + length;
        long before = bytes;
        Map.Entry<Long, Long> joined = allocations.floorEntry(start);
        if (joined != null && joined.getKey() + joined.getValue() >= start) {
            start = joined.getKey();
            end = Math.max(end, joined.getKey() + joined.getValue());
        }
        for (Map.Entry<Long, Long> next = allocations.ceilingEntry(start); next != null && next.getKey() <= end;
                next = allocations.ceilingEntry(start)) {
            end = Math.max(end, next.getKey() + next.getValue());
            bytes -= next.getValue();
            allocations.remove(next.getKey());
        }
        allocations.put(start, end - start);
        bytes += end - start;
        return bytes - before;
    }

    /** Cuts [address, end) out of the allocations that hold it (page-aligned); what was not reserved is skipped. */
    void cut(long address, long end) {
        Map.Entry<Long, Long> first = allocations.floorEntry(address);
        long from = first != null && first.getKey() + first.getValue() > address ? first.getKey() : address;
        for (Map.Entry<Long, Long> a = allocations.ceilingEntry(from); a != null && a.getKey() < end; a = allocations.ceilingEntry(from)) {
            long aStart = a.getKey();
            long aEnd = aStart + a.getValue();
            allocations.remove(aStart);
            bytes -= a.getValue();
            if (aStart < address) {
                allocations.put(aStart, address - aStart);
                bytes += address - aStart;
            }
            if (aEnd > end) {
                allocations.put(end, aEnd - end);
                bytes += aEnd - end;
            }
            from = aEnd;
        }
    }

    /** The length of the allocation that starts at {@code address}, or -1 when none does. */
    long lengthAt(long address) {
        Long length = allocations.get(address);
        return length == null ? -1 : length;
    }

    /** Forgets the allocation that starts at {@code address} (one {@link #lengthAt} found). */
    void remove(long address) {
        Long length = allocations.remove(address);
        if (length != null) {
            bytes -= length;
        }
    }

    /** Every allocation as {start, length}, forgetting them all. */
    List<long[]> removeAll() {
        List<long[]> all = new ArrayList<>(allocations.size());
        allocations.forEach((start, length) -> all.add(new long[] {start, length}));
        allocations.clear();
        bytes = 0;
        return all;
    }

    /** Whether [address, address + length) lies inside one allocation. */
    boolean contains(long address, long length) {
        if (length < 0 || address < 0) {
            return false;
        }
        Map.Entry<Long, Long> allocation = allocations.floorEntry(address);
        if (allocation == null) {
            return false;
        }
        long end = allocation.getKey() + allocation.getValue();
        return address < end && length <= end - address;
    }
}
