package io.pagewire.kernel;

import io.pagewire.ring.PageTableFile;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The virtual memory of one endpoint (an application's process on the node): its allocations, its
 * page table, its pins, and the listeners (NICs) that hold translations into it.
 *
 * <p>Allocation only reserves virtual space; a page gets a frame at its first touch, by a CPU access
 * ({@link #store}, {@link #load}), a pin, or a NIC page fault. Every method takes the kernel lock, and
 * releases it while it waits: for swap I/O, for a page in transit, for a copy, for DMA to drain (see
 * {@link KernelAgent}).
 */
public final class AddressSpace implements AutoCloseable {
    /** Lowest address handed out; everything below, address 0 included, is never mapped. */
    public static final long FIRST_ADDRESS = 0x1000_0000L;
    /** One past the highest user address: the lower half of a 48-bit address space. */
    public static final long END_ADDRESS = 1L << (PageTable.ADDRESS_BITS - 1);

    private static final System.Logger LOG = System.getLogger(AddressSpace.class.getName());

    private final KernelAgent kernel;
    private final PhysicalMemory memory;
    private final KernelCounters counters;
    private final int id;
    private final int pageSize;
    private final int pageShift;
    private final PageTable pageTable;
    private final AllocationMap allocations;
    private final List<MemoryListener> listeners = new CopyOnWriteArrayList<>();
    /** Advances before listeners are told of an invalidation; see {@link #isCurrent}. */
    private volatile long sequence;
    private int residentPages;
    private int pinnedPages;
    private final Account account;
    private int swappedPages;
    private boolean closed;
    /** The page table as CPUs (applications that map the node's memory) see it, or null: none does. */
    private PageTableFile cpuTable;
    /** The CPU slot of the session that maps this space's pages (its guards hold this value), or 0. */
    private int cpuSlot;

    AddressSpace(KernelAgent kernel, int id, Account account) {
        this.kernel = kernel;
        this.account = account;
        this.memory = kernel.memory();
        this.counters = kernel.counters();
        this.id = id;
        this.pageSize = memory.pageSize();
        this.pageShift = Integer.numberOfTrailingZeros(pageSize);
        this.pageTable = new PageTable(pageShift);
        this.allocations = new AllocationMap(pageSize);
    }

    /** Whose share of the node's memory and pins this space's pages count against. */
    public Account account() {
        return account;
    }

    /** The endpoint id this address space belongs to. */
    public int id() {
        return id;
    }

    public int pageSize() {
        return pageSize;
    }

    public int pageShift() {
        return pageShift;
    }

    // ---- allocation ---------------------------------------------------------------------------

    /**
     * Reserves {@code length} bytes of virtual memory, rounded up to whole pages, and returns where
     * they start. No frame is used until a page is touched. An unmapped guard page follows.
     */
    public long allocate(long length) {
        if (length <= 0) {
            throw new IllegalArgumentException("allocation length must be positive, was " + length);
        }
        kernel.lock();
        try {
            checkOpen();
            return allocations.reserve(length, this);
        } finally {
            kernel.unlock();
        }
    }

    /**
     * Reserves exactly [address, address + length), page-aligned, as a process's own memory is where
     * the process put it (the C verbs library registers a program's buffers at their addresses). An
     * allocation the range overlaps or touches joins it, so a buffer registered twice, or two buffers
     * side by side, are one allocation; pages already reserved keep what they hold.
     *
     * @return the bytes newly reserved
     */
    public long allocateAt(long address, long length) {
        if (length <= 0 || ((address | length) & (pageSize - 1)) != 0 || address < pageSize || address > END_ADDRESS - length) {
            throw new BadAddressException(String.format("cannot reserve 0x%x+%d: it must be page-aligned, not empty, above page 0 and"
                    + " below 0x%x", address, length, END_ADDRESS));
        }
        kernel.lock();
        try {
            checkOpen();
            return allocations.reserveAt(address, length);
        } finally {
            kernel.unlock();
        }
    }

    /**
     * Frees exactly the pages of [address, address + length), page-aligned, cutting the allocations
     * that hold them (what {@code munmap} does to part of a mapping). Pages not reserved are skipped.
     */
    public void freeRange(long address, long length) {
        if (length <= 0 || ((address | length) & (pageSize - 1)) != 0 || address < 0 || address > END_ADDRESS - length) {
            throw new BadAddressException(String.format("cannot free 0x%x+%d: it must be page-aligned and not empty", address, length));
        }
        long end = address + length;
        kernel.lock();
        try {
            while (true) {
                checkOpen();
                if (!anyInTransit(address >>> pageShift, end >>> pageShift)) {
                    break;
                }
                kernel.awaitTransit();
            }
            allocations.cut(address, end);
            FramesToFree taken = new FramesToFree();
            unmap(address >>> pageShift, length >>> pageShift, taken);
            kernel.drainAndFree(taken.frames, taken.count, this);
        } finally {
            kernel.unlock();
        }
    }

    /**
     * A CPU maps the pages of [address, address + length) into its own page tables (the C verbs library,
     * at the program's addresses): each is faulted in, counted as a CPU fault, and marked CPU-mapped, so
     * reclaim asks that CPU to unmap it ({@link MemoryListener#cpuUnmapWanted}) before it takes the frame,
     * as a kernel shoots a page down from the processes that map it.
     *
     * @return each page's frame, in order
     */
    public int[] holdForCpu(long address, long length) {
        requireUserRange(address, length, "map for a CPU");
        long firstVpn = address >>> pageShift;
        long endVpn = (address + length + pageSize - 1) >>> pageShift;
        if (endVpn - firstVpn > MAX_CPU_PAGES_AT_ONCE) {
            throw new BadAddressException(String.format("cannot map 0x%x+%d for a CPU: at most %d pages at once", address, length,
                    MAX_CPU_PAGES_AT_ONCE));
        }
        int[] frames = new int[(int) (endVpn - firstVpn)];
        kernel.lock();
        try {
            checkOpen();
            requireAllocated(firstVpn << pageShift, (endVpn - firstVpn) << pageShift);
            for (long vpn = firstVpn; vpn < endVpn; vpn++) {
                // A fault may wait for a transit with the lock released: the pages before are looked at again below.
                countFault(makeResident(vpn, true), false);
            }
            for (long vpn = firstVpn; vpn < endVpn; vpn++) {
                PageTableEntry entry = pageTable.get(vpn);
                if (entry == null || !entry.present()) {
                    countFault(makeResident(vpn, true), false);
                    entry = pageTable.get(vpn);
                }
                entry.cpuMapped = true;
                entry.cpuUnmapRequested = false;
                entry.pageOutWanted = false;
                frames[(int) (vpn - firstVpn)] = entry.frame;
            }
        } finally {
            kernel.unlock();
        }
        return frames;
    }

    /** A CPU unmapped the pages of [address, address + length) it mapped ({@link #holdForCpu}): reclaim may take them. */
    public void releaseForCpu(long address, long length) {
        requireUserRange(address, length, "unmap for a CPU");
        long firstVpn = address >>> pageShift;
        long endVpn = (address + length + pageSize - 1) >>> pageShift;
        kernel.lock();
        try {
            checkOpen();
            List<Long> wanted = new ArrayList<>();
            pageTable.forEach(firstVpn, endVpn, (vpn, entry) -> {
                entry.cpuMapped = false;
                entry.cpuUnmapRequested = false;
                if (entry.pageOutWanted) {
                    entry.pageOutWanted = false;
                    wanted.add(vpn);
                }
            });
            pageOutNow(wanted);
        } finally {
            kernel.unlock();
        }
    }

    /**
     * Drops the pages of [address, address + length) and what they hold, keeping them reserved: the next
     * touch, by the NIC or a CPU, finds a zero page (what {@code madvise(MADV_DONTNEED)} does to private
     * memory). NIC translations go first. Pinned pages are refused.
     */
    public void discard(long address, long length) {
        requireUserRange(address, length, "discard");
        if (((address | length) & (pageSize - 1)) != 0) {
            throw new BadAddressException(String.format("cannot discard 0x%x+%d: it must be page-aligned and not empty", address, length));
        }
        long firstVpn = address >>> pageShift;
        long endVpn = (address + length) >>> pageShift;
        kernel.lock();
        try {
            while (true) {
                checkOpen();
                requireAllocated(address, length);
                if (!anyInTransit(firstVpn, endVpn)) {
                    break;
                }
                kernel.awaitTransit();
            }
            boolean[] pinned = {false};
            pageTable.forEach(firstVpn, endVpn, (vpn, entry) -> pinned[0] |= entry.pinCount > 0);
            if (pinned[0]) {
                throw new KernelException(String.format("cannot discard 0x%x+%d of %s: pages there are pinned", address, length, this));
            }
            FramesToFree taken = new FramesToFree();
            unmap(firstVpn, endVpn - firstVpn, taken, InvalidationReason.EVICTION);
            kernel.drainAndFree(taken.frames, taken.count, this);
        } finally {
            kernel.unlock();
        }
    }

    /** The most pages one call maps for a CPU (its answer lists each page's frame). */
    private static final long MAX_CPU_PAGES_AT_ONCE = 1 << 22;

    /** Throws {@link BadAddressException} unless [address, address + length) is a non-empty range of user addresses. */
    private static void requireUserRange(long address, long length, String what) {
        if (length <= 0 || address < 0 || address > END_ADDRESS - length) {
            throw new BadAddressException(String.format("cannot %s 0x%x+%s: the range must be non-empty and below 0x%x", what, address,
                    Long.toUnsignedString(length), END_ADDRESS));
        }
    }

    /** Reclaim wants a CPU-mapped page: ask its CPU to unmap it, once. Kernel lock held. */
    void wantCpuUnmap(long vpn, PageTableEntry entry) {
        if (entry.cpuUnmapRequested) {
            return;
        }
        entry.cpuUnmapRequested = true;
        counters.increment(KernelCounter.CPU_UNMAPS_REQUESTED);
        for (MemoryListener listener : listeners) {
            try {
                listener.cpuUnmapWanted(this, vpn);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "memory listener failed on a CPU unmap request for page " + vpn + " in " + this, e);
            }
        }
    }

    /**
     * Frees the allocation that starts at {@code address}: listeners drop their translations, pins
     * are revoked, in-flight DMA drains, then frames and swap slots are returned.
     */
    public void free(long address) {
        kernel.lock();
        try {
            long bytes;
            while (true) {
                checkOpen();
                bytes = allocations.lengthAt(address);
                if (bytes < 0) {
                    throw new BadAddressException(String.format("address 0x%x is not the start of an allocation in endpoint %d", address, id));
                }
                if (!anyInTransit(address >>> pageShift, (address + bytes) >>> pageShift)) {
                    break;
                }
                kernel.awaitTransit();
            }
            allocations.remove(address);
            FramesToFree taken = new FramesToFree();
            unmap(address >>> pageShift, bytes >>> pageShift, taken);
            kernel.drainAndFree(taken.frames, taken.count, this);
        } finally {
            kernel.unlock();
        }
    }

    /** Whether [address, address + length) lies inside one allocation. */
    public boolean isAllocated(long address, long length) {
        kernel.lock();
        try {
            return !closed && allocations.contains(address, length);
        } finally {
            kernel.unlock();
        }
    }

    /** Throws {@link BadAddressException} unless [address, address + length) lies inside one allocation. */
    public void checkAllocated(long address, long length) {
        kernel.lock();
        try {
            checkOpen();
            requireAllocated(address, length);
        } finally {
            kernel.unlock();
        }
    }

    // ---- CPU access ---------------------------------------------------------------------------

    /** Copies bytes into memory as a CPU store would, faulting pages in. */
    public void store(long address, byte[] src, int srcOffset, int length) {
        store(address, ByteBuffer.wrap(src, srcOffset, length));
    }

    /** Copies the remaining bytes of {@code src} into memory at {@code address}, faulting pages in. */
    public void store(long address, ByteBuffer src) {
        int length = src.remaining();
        kernel.lock();
        try {
            checkOpen();
            requireAllocated(address, length);
            long va = address;
            int end = src.limit();
            while (src.position() < end) {
                int offset = (int) (va & (pageSize - 1));
                int chunk = Math.min(pageSize - offset, end - src.position());
                int frame = lockFrameForCpu(va >>> pageShift, true);
                kernel.unlock();
                try {
                    src.limit(src.position() + chunk);
                    memory.write(frame, offset, src);
                    src.limit(end);
                } finally {
                    memory.unlockDma(frame, true);
                    kernel.lock();
                }
                va += chunk;
            }
        } finally {
            kernel.unlock();
        }
    }

    /** Copies bytes out of memory as a CPU load would, faulting pages in. */
    public void load(long address, byte[] dst, int dstOffset, int length) {
        kernel.lock();
        try {
            checkOpen();
            requireAllocated(address, length);
            long va = address;
            int done = 0;
            while (done < length) {
                int offset = (int) (va & (pageSize - 1));
                int chunk = Math.min(pageSize - offset, length - done);
                int frame = lockFrameForCpu(va >>> pageShift, false);
                kernel.unlock();
                try {
                    memory.read(frame, offset, dst, dstOffset + done, chunk);
                } finally {
                    memory.unlockDma(frame, false);
                    kernel.lock();
                }
                va += chunk;
                done += chunk;
            }
        } finally {
            kernel.unlock();
        }
    }

    /** Adds to the 8-byte little-endian word at an 8-byte aligned address as a CPU's atomic would; returns it before. */
    public long fetchAddLong(long address, long delta) {
        return atomicWord(address, false, delta, 0);
    }

    /** Replaces the word with {@code swap} if it equals {@code compare}, as a CPU's atomic would; returns it before. */
    public long compareAndSwapLong(long address, long compare, long swap) {
        return atomicWord(address, true, compare, swap);
    }

    private long atomicWord(long address, boolean compareSwap, long operand, long swap) {
        if ((address & 7) != 0) {
            throw new BadAddressException(String.format("an atomic needs an 8-byte aligned address, not 0x%x", address));
        }
        kernel.lock();
        try {
            checkOpen();
            requireAllocated(address, 8);
            int frame = lockFrameForCpu(address >>> pageShift, true);
            kernel.unlock();
            long before = 0;
            try {
                int offset = (int) (address & (pageSize - 1));
                before = compareSwap ? memory.compareAndExchangeLong(frame, offset, operand, swap) : memory.getAndAddLong(frame, offset, operand);
                return before;
            } finally {
                memory.unlockDma(frame, !compareSwap || before == operand);
                kernel.lock();
            }
        } finally {
            kernel.unlock();
        }
    }

    /**
     * Touches one page as the CPU would, faulting it in if needed.
     *
     * @return how the fault was served, or null when the page was already resident
     */
    public FaultKind touch(long address, boolean write) {
        kernel.lock();
        try {
            checkOpen();
            requireAllocated(address, 1);
            FaultKind kind = makeResident(address >>> pageShift, write);
            countFault(kind, false);
            return kind;
        } finally {
            kernel.unlock();
        }
    }

    /**
     * Makes a page resident for a CPU access and locks its frame as a DMA would, so that the copy can
     * run with the kernel lock released and reclaim still leaves the frame alone.
     */
    private int lockFrameForCpu(long vpn, boolean write) {
        countFault(makeResident(vpn, write), false);
        int frame = pageTable.get(vpn).frame;
        if (!memory.tryLockForDma(frame, memory.generation(frame))) {
            throw new IllegalStateException("frame " + frame + " of a resident page is being reclaimed under the kernel lock");
        }
        return frame;
    }

    // ---- CPUs: an application that maps the node's memory -------------------------------------

    /** How much virtual memory a CPU reaches through its page table: past it, the node's calls. */
    public static final long CPU_VISIBLE_BYTES = 16L << 30;

    /**
     * Lets the application of this space reach its pages directly: makes the CPU-visible page table
     * at {@code path} (filled with the pages resident now, kept up to date from here on) and a CPU
     * slot for its guards. Both go when the space closes.
     *
     * @return the CPU slot the application's guards hold
     */
    public int shareWithCpu(Path path) {
        kernel.lock();
        try {
            checkOpen();
            if (cpuTable != null) {
                throw new KernelException(this + " already shares its pages with a CPU");
            }
            long firstVpn = FIRST_ADDRESS >>> pageShift;
            PageTableFile table = PageTableFile.create(path, id, pageShift, firstVpn, CPU_VISIBLE_BYTES >>> pageShift);
            pageTable.forEach(firstVpn, END_ADDRESS >>> pageShift, (vpn, entry) -> {
                if (entry.present()) {
                    table.map(vpn, entry.frame);
                }
            });
            cpuSlot = memory.openCpuSlot();
            cpuTable = table;
            return cpuSlot;
        } finally {
            kernel.unlock();
        }
    }

    /** The CPU slot of the application that shares this space's pages, or 0. */
    public int cpuSlot() {
        kernel.lock();
        try {
            return cpuSlot;
        } finally {
            kernel.unlock();
        }
    }

    /** Where the CPU-visible page table is, or null when no CPU shares this space. */
    public Path cpuPageTable() {
        PageTableFile table = cpuTable;
        return table == null ? null : table.path();
    }

    /** A page got a frame: its CPU-visible entry says so (after the frame's state word does). */
    private void mapForCpu(long vpn, int frame) {
        if (cpuTable != null) {
            cpuTable.map(vpn, frame);
        }
    }

    /** A page lost its frame: its CPU-visible entry goes (the frame is already marked reclaiming). */
    private void unmapForCpu(long vpn) {
        if (cpuTable != null) {
            cpuTable.unmap(vpn);
        }
    }

    // ---- the NIC's interface: translations, faults, pins --------------------------------------

    /**
     * The translation of a page if it is resident, or null; never faults. A NIC caches the result
     * only if {@link #isCurrent} still holds under the lock its invalidation callback takes.
     *
     * @throws BadAddressException if the page is not allocated
     */
    public Translation translate(long vpn) {
        kernel.lock();
        try {
            checkOpen();
            requireAllocatedPage(vpn);
            PageTableEntry entry = pageTable.get(vpn);
            return entry == null || !entry.present() ? null : translationOf(entry);
        } finally {
            kernel.unlock();
        }
    }

    /**
     * Whether no invalidation started since the translation was made: the read-retry check of the
     * kernel's {@code mmu_interval_notifier}.
     */
    public boolean isCurrent(Translation translation) {
        return translation.sequence() == sequence;
    }

    /** The invalidation sequence; it advances before every invalidation callback. */
    public long sequence() {
        return sequence;
    }

    /**
     * Serves a NIC page fault synchronously: the page is made resident and its translation returned.
     * A page that was already resident counts as a minor fault (the NIC lacked only the translation).
     */
    PageFault serviceNicFault(long vpn, boolean write) {
        long start = kernel.clock().nanoTime();
        kernel.lock();
        try {
            checkOpen();
            requireAllocatedPage(vpn);
            FaultKind kind = makeResident(vpn, write);
            if (kind == null) {
                kind = FaultKind.MINOR;
            }
            countFault(kind, true);
            return new PageFault(kind, translationOf(pageTable.get(vpn)), kernel.clock().nanoTime() - start);
        } finally {
            kernel.unlock();
        }
    }

    /**
     * Pins one page, faulting it in first if it is not resident, and says where it is. The page
     * keeps its frame until every pin on it is released. The pin's own cost ({@link KernelContext#pinCostNs})
     * is spent on the calling thread after the kernel lock is released.
     *
     * @throws PinLimitExceededException if the memlock or the node pin limit would be exceeded
     */
    public Pinned pin(long vpn, boolean write) {
        Pinned pinned;
        kernel.lock();
        try {
            checkOpen();
            requireAllocatedPage(vpn);
            PageTableEntry before = pageTable.get(vpn);
            if (before == null || before.pinCount == 0) {
                kernel.checkPinLimits(this, 1);
            }
            FaultKind fault = makeResident(vpn, write);
            countFault(fault, true);
            PageTableEntry entry = pageTable.get(vpn);
            if (entry.pinCount == 0) {
                // Again: the fault may have waited with the lock released while others pinned.
                kernel.checkPinLimits(this, 1);
            }
            addPin(entry);
            pinned = new Pinned(translationOf(entry), fault);
        } finally {
            kernel.unlock();
        }
        kernel.spendPinCost(1);
        return pinned;
    }

    /**
     * Throws what {@link #pinRange} would throw for the pin limits, pinning nothing: lets a caller learn
     * that a range cannot be pinned before it pays for mapping it.
     *
     * @throws PinLimitExceededException when pinning the range would pass a limit
     */
    public void checkPinRange(long address, long length) {
        if (length <= 0 || address < 0 || address + length < address || address + length + pageSize - 1 < 0) {
            throw new BadAddressException(String.format("range 0x%x+%d is not a range of addresses", address, length));
        }
        long firstVpn = address >>> pageShift;
        long endVpn = (address + length + pageSize - 1) >>> pageShift;
        kernel.lock();
        try {
            checkOpen();
            // At most pinnedPages() of the range are pinned already: that bound refuses a range too large for the
            // limits before any page is counted, so the count below walks no more pages than the limits allow.
            kernel.checkPinLimits(this, (endVpn - firstVpn) - pinnedPages());
            kernel.checkPinLimits(this, unpinnedPages(firstVpn, endVpn));
        } finally {
            kernel.unlock();
        }
    }

    private long unpinnedPages(long firstVpn, long endVpn) {
        long unpinned = 0;
        for (long vpn = firstVpn; vpn < endVpn; vpn++) {
            PageTableEntry entry = pageTable.get(vpn);
            if (entry == null || entry.pinCount == 0) {
                unpinned++;
            }
        }
        return unpinned;
    }

    /**
     * Pins every page of [address, address + length), all or none: the limits are checked for the
     * whole range first, and a failure part way (memory exhausted) releases the pins already taken.
     */
    public void pinRange(long address, long length) {
        long pages;
        kernel.lock();
        try {
            checkOpen();
            requireAllocated(address, length);
            long firstVpn = address >>> pageShift;
            long endVpn = (address + length + pageSize - 1) >>> pageShift;
            pages = endVpn - firstVpn;
            kernel.checkPinLimits(this, unpinnedPages(firstVpn, endVpn));
            long vpn = firstVpn;
            try {
                for (; vpn < endVpn; vpn++) {
                    countFault(makeResident(vpn, true), true);
                    PageTableEntry entry = pageTable.get(vpn);
                    if (entry.pinCount == 0) {
                        // Again per page: a fault may have waited with the lock released while others pinned.
                        kernel.checkPinLimits(this, 1);
                    }
                    addPin(entry);
                }
            } catch (RuntimeException e) {
                for (long done = firstVpn; done < vpn; done++) {
                    removePin(done);
                }
                throw e;
            }
        } finally {
            kernel.unlock();
        }
        kernel.spendPinCost(pages);
    }

    /** Releases one pin on a page. */
    public void unpin(long vpn) {
        kernel.lock();
        try {
            checkOpen();
            removePin(vpn);
        } finally {
            kernel.unlock();
        }
        kernel.spendPinCost(1);
    }

    /** Releases one pin on every page of [address, address + length). */
    public void unpinRange(long address, long length) {
        long endVpn = (address + length + pageSize - 1) >>> pageShift;
        kernel.lock();
        try {
            checkOpen();
            for (long vpn = address >>> pageShift; vpn < endVpn; vpn++) {
                removePin(vpn);
            }
        } finally {
            kernel.unlock();
        }
        kernel.spendPinCost(endVpn - (address >>> pageShift));
    }

    /** Pins on one page (0 if it was never touched). */
    public int pinCount(long vpn) {
        kernel.lock();
        try {
            PageTableEntry entry = pageTable.get(vpn);
            return entry == null ? 0 : entry.pinCount;
        } finally {
            kernel.unlock();
        }
    }

    /**
     * Pushes the resident pages of [address, +length) out of memory, as {@code madvise(MADV_PAGEOUT)}
     * does: a dirty page goes to swap, a clean one that swap holds loses its frame, one that was
     * never written is dropped (it reads as zeros again); the contents stay what they were. Pinned
     * pages, pages under DMA and pages in transit stay. A page a CPU maps goes once that CPU has
     * unmapped it, as the kernel asks it to. The next touch, by the CPU or the NIC, faults.
     *
     * @return how many pages lost their frame now (not counting those waiting for a CPU)
     */
    public int pageOut(long address, long length) {
        if (length <= 0 || address + length < address) {
            throw new BadAddressException(String.format("page-out range 0x%x+%d is empty or wraps", address, length));
        }
        checkAllocated(address, length);
        long first = address >>> pageShift;
        long end = ((address + length - 1) >>> pageShift) + 1;
        int out;
        kernel.lock();
        try {
            // Only pages that exist are visited: a huge, mostly untouched range costs what is in it.
            List<Long> vpns = new ArrayList<>();
            pageTable.forEach(first, end, (vpn, entry) -> {
                if (entry.present() && entry.pinCount == 0 && !entry.inTransit) {
                    if (entry.cpuMapped) {
                        entry.pageOutWanted = true; // a CPU maps it: it goes once that CPU has let go
                        wantCpuUnmap(vpn, entry);
                    } else {
                        vpns.add(vpn);
                    }
                }
            });
            out = pageOutNow(vpns);
        } finally {
            kernel.unlock();
        }
        return out;
    }

    /** Takes the frames of these pages that are still resident, unpinned and unmapped by CPUs (kernel lock held); how many went. */
    private int pageOutNow(List<Long> vpns) {
        int out = 0;
        for (long vpn : vpns) {
            // Writing a page back releases the lock: look at each page again before taking its frame.
            PageTableEntry entry = pageTable.get(vpn);
            if (entry != null && entry.present() && entry.pinCount == 0 && !entry.inTransit && !entry.cpuMapped
                    && kernel.pageOut(entry.frame)) {
                out++;
            }
        }
        return out;
    }

    /** Whether a page currently has a frame. */
    public boolean isResident(long vpn) {
        kernel.lock();
        try {
            return hasFrame(vpn);
        } finally {
            kernel.unlock();
        }
    }

    /** Whether a page has a frame (kernel lock held). */
    private boolean hasFrame(long vpn) {
        PageTableEntry entry = pageTable.get(vpn);
        return entry != null && entry.present();
    }

    /**
     * The pages of [firstVpn, firstVpn + count) that have no frame, in order, read under one hold of
     * the kernel lock (for a NIC that faults a range in: one lock, not one per page).
     */
    public long[] nonResidentPages(long firstVpn, int count) {
        long[] missing = new long[Math.max(0, count)];
        int found = 0;
        kernel.lock();
        try {
            for (int i = 0; i < count; i++) {
                if (!hasFrame(firstVpn + i)) {
                    missing[found++] = firstVpn + i;
                }
            }
        } finally {
            kernel.unlock();
        }
        return found == missing.length ? missing : Arrays.copyOf(missing, found);
    }

    public void addListener(MemoryListener listener) {
        listeners.add(listener);
    }

    public void removeListener(MemoryListener listener) {
        listeners.remove(listener);
    }

    // ---- figures ------------------------------------------------------------------------------

    public long allocatedBytes() {
        kernel.lock();
        try {
            return allocations.bytes();
        } finally {
            kernel.unlock();
        }
    }

    public int residentPages() {
        kernel.lock();
        try {
            return residentPages;
        } finally {
            kernel.unlock();
        }
    }

    /** Distinct pages with at least one pin; this is what the memlock limit bounds. */
    public int pinnedPages() {
        kernel.lock();
        try {
            return pinnedPages;
        } finally {
            kernel.unlock();
        }
    }

    public int swappedPages() {
        kernel.lock();
        try {
            return swappedPages;
        } finally {
            kernel.unlock();
        }
    }

    public boolean isClosed() {
        kernel.lock();
        try {
            return closed;
        } finally {
            kernel.unlock();
        }
    }

    /** Frees every allocation (revoking pins, draining DMA) and forgets the listeners: the endpoint exited. */
    @Override
    public void close() {
        kernel.lock();
        try {
            while (!closed && anyInTransit(0, END_ADDRESS >>> pageShift)) {
                kernel.awaitTransit();
            }
            if (closed) {
                return;
            }
            closed = true;
            FramesToFree taken = new FramesToFree();
            for (long[] allocation : allocations.removeAll()) {
                unmap(allocation[0] >>> pageShift, allocation[1] >>> pageShift, taken);
            }
            listeners.clear();
            kernel.forget(this);
            try {
                kernel.drainAndFree(taken.frames, taken.count, this);
            } finally {
                if (cpuTable != null) {
                    memory.closeCpuSlot(cpuSlot);
                    cpuTable.deleteFile();
                }
            }
        } finally {
            kernel.unlock();
        }
    }

    @Override
    public String toString() {
        return "endpoint " + id;
    }

    // ---- mechanics, kernel lock held ----------------------------------------------------------

    /**
     * Gives page {@code vpn} a frame if it has none: zero-filled at first touch (minor), read from swap
     * otherwise (major). It may release the kernel lock meanwhile (to wait for the page's transit, for
     * a victim's write-back, or for its own swap read) and looks again each time; on return the page is
     * resident, under the lock.
     *
     * @return how the page was brought in, or null if it was resident
     */
    private FaultKind makeResident(long vpn, boolean write) {
        while (true) {
            checkOpen();
            requireAllocatedPage(vpn);
            PageTableEntry entry = pageTable.getOrCreate(vpn);
            if (entry.inTransit) {
                kernel.awaitTransit();
                continue;
            }
            if (entry.present()) {
                memory.markAccessed(entry.frame, write);
                return null;
            }
            if (entry.swapSlot < 0) {
                kernel.checkPageShare(this, vpn); // a new page: within its application's share of the node
            }
            int frame = kernel.obtainFrame(this, vpn);
            if (closed || pageTable.get(vpn) != entry || entry.inTransit || entry.present()) {
                // Things moved while a victim was written back: start again with the frame returned.
                kernel.returnFreeFrame(frame);
                continue;
            }
            FaultKind kind;
            if (entry.swapSlot >= 0) {
                serveWithLockReleased(entry, frame, true);
                counters.increment(KernelCounter.SWAP_INS);
                swappedPages--;
                kind = FaultKind.MAJOR;
                if (write) {
                    // The page is about to differ from its slot; keeping the slot would only waste it.
                    kernel.swap().release(entry.swapSlot);
                    entry.swapSlot = -1;
                }
            } else {
                if (kernel.faultOverheadNs() > 0) {
                    serveWithLockReleased(entry, frame, false);
                }
                memory.zero(frame);
                account.held(1);
                kind = FaultKind.MINOR;
            }
            memory.assign(frame, write);
            entry.frame = frame;
            mapForCpu(vpn, frame);
            kernel.frames().attach(frame, this, vpn, entry);
            residentPages++;
            if (!listeners.isEmpty()) {
                Translation translation = translationOf(entry);
                for (MemoryListener listener : listeners) {
                    try {
                        listener.mapped(this, vpn, translation);
                    } catch (RuntimeException e) {
                        LOG.log(System.Logger.Level.WARNING, "memory listener failed on map of page " + vpn + " in " + this, e);
                    }
                }
            }
            return kind;
        }
    }

    /**
     * The part of a fault that takes time, with the kernel lock released and the page in transit
     * meanwhile: the fault handler's own overhead, then (for a major fault) the read of the page's
     * slot into the frame.
     */
    private void serveWithLockReleased(PageTableEntry entry, int frame, boolean fromSwap) {
        entry.inTransit = true;
        RuntimeException failure = null;
        kernel.unlock();
        try {
            kernel.awaitFaultOverhead();
            if (fromSwap) {
                kernel.swap().read(entry.swapSlot, memory, frame);
            }
        } catch (RuntimeException e) {
            failure = e;
        } finally {
            kernel.lock();
            entry.inTransit = false;
            kernel.transitEnded();
        }
        if (failure != null) {
            kernel.returnFreeFrame(frame);
            throw failure;
        }
    }

    /**
     * Takes the frame from a page that reclaim chose (its frame is already marked reclaiming):
     * listeners drop their translations, and the page now lives in {@code slot}. A dirty page is in
     * transit until the reclaimer, having written the frame to the slot, calls {@link #writebackEnded}.
     */
    void evict(long vpn, PageTableEntry entry, int slot, boolean dirty) {
        notifyInvalidate(vpn, 1, InvalidationReason.EVICTION);
        unmapForCpu(vpn);
        entry.frame = -1;
        entry.swapSlot = slot;
        entry.inTransit = dirty;
        if (slot >= 0) {
            swappedPages++;
        } else {
            // A clean page that was never written: it will be zero-filled again at its next touch.
            pageTable.remove(vpn);
            account.held(-1);
        }
        residentPages--;
    }

    /**
     * The write-back of an evicted page ended. If it failed, the page keeps its frame (the reclaimer
     * gives the frame back) and stays out of swap.
     */
    void writebackEnded(long vpn, PageTableEntry entry, int frame, RuntimeException failure) {
        entry.inTransit = false;
        if (failure != null) {
            entry.frame = frame;
            mapForCpu(vpn, frame);
            entry.swapSlot = -1;
            swappedPages--;
            residentPages++;
            LOG.log(System.Logger.Level.WARNING, "writing page " + vpn + " of " + this + " to swap failed; it stays in memory", failure);
        }
        kernel.transitEnded();
    }

    /** Whether a page of [firstVpn, endVpn) is moving to or from swap right now. */
    private boolean anyInTransit(long firstVpn, long endVpn) {
        boolean[] found = {false};
        pageTable.forEach(firstVpn, endVpn, (vpn, entry) -> found[0] |= entry.inTransit);
        return found[0];
    }

    /** Frames taken from unmapped pages, to go back to the free list once their DMA drained. */
    private static final class FramesToFree {
        int[] frames = new int[16];
        int count;

        void add(int frame) {
            if (count == frames.length) {
                frames = Arrays.copyOf(frames, count * 2);
            }
            frames[count++] = frame;
        }
    }

    /**
     * Unmaps [firstVpn, firstVpn + pageCount), none of them in transit: invalidate, revoke pins,
     * release swap slots, and take the frames (into {@code taken}, for the caller to drain and free).
     */
    private void unmap(long firstVpn, long pageCount, FramesToFree taken) {
        unmap(firstVpn, pageCount, taken, InvalidationReason.UNMAP);
    }

    /**
     * As {@link #unmap(long, long, FramesToFree)}, telling listeners {@code reason}: EVICTION when the pages
     * stay allocated (discarded), so translations go and the next access faults a zero page in.
     */
    private void unmap(long firstVpn, long pageCount, FramesToFree taken, InvalidationReason reason) {
        long endVpn = firstVpn + pageCount;
        notifyInvalidate(firstVpn, pageCount, reason);
        kernel.systemBuffer().discard(this, firstVpn, endVpn);
        pageTable.forEach(firstVpn, endVpn, (vpn, entry) -> {
            if (entry.pinCount > 0) {
                counters.add(KernelCounter.PINS_REVOKED, entry.pinCount);
                entry.pinCount = 0;
                pinnedPages--;
                kernel.pinnedPagesChanged(this, -1);
            }
            boolean present = entry.present();
            if (present || entry.swapSlot >= 0) {
                account.held(-1);
            }
            if (present) {
                kernel.takeFrameFromUnmappedPage(entry.frame);
                unmapForCpu(vpn);
                taken.add(entry.frame);
                entry.frame = -1;
                residentPages--;
            }
            if (entry.swapSlot >= 0) {
                // A resident page may keep the slot it was read from; it counts as resident only.
                kernel.swap().release(entry.swapSlot);
                entry.swapSlot = -1;
                if (!present) {
                    swappedPages--;
                }
            }
            pageTable.remove(vpn);
        });
    }

    private void notifyInvalidate(long firstVpn, long pageCount, InvalidationReason reason) {
        sequence++;
        counters.add(KernelCounter.INVALIDATIONS, pageCount);
        for (MemoryListener listener : listeners) {
            try {
                listener.invalidate(this, firstVpn, pageCount, reason);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "memory listener failed on " + reason + " of " + pageCount
                        + " pages at page " + firstVpn + " in " + this, e);
            }
        }
    }

    private void addPin(PageTableEntry entry) {
        if (entry.pinCount++ == 0) {
            pinnedPages++;
            kernel.pinnedPagesChanged(this, 1);
        }
        counters.increment(KernelCounter.PINS);
    }

    private void removePin(long vpn) {
        PageTableEntry entry = pageTable.get(vpn);
        if (entry == null || entry.pinCount == 0) {
            throw new IllegalStateException(String.format("page 0x%x of %s is not pinned", vpn << pageShift, this));
        }
        if (--entry.pinCount == 0) {
            pinnedPages--;
            kernel.pinnedPagesChanged(this, -1);
        }
        counters.increment(KernelCounter.UNPINS);
    }

    private void countFault(FaultKind kind, boolean nic) {
        if (kind == FaultKind.MINOR) {
            counters.increment(nic ? KernelCounter.NIC_FAULTS_MINOR : KernelCounter.CPU_FAULTS_MINOR);
        } else if (kind == FaultKind.MAJOR) {
            counters.increment(nic ? KernelCounter.NIC_FAULTS_MAJOR : KernelCounter.CPU_FAULTS_MAJOR);
        }
    }

    private Translation translationOf(PageTableEntry entry) {
        return new Translation(entry.frame, memory.generation(entry.frame), sequence);
    }

    private void requireAllocated(long address, long length) {
        if (!allocations.contains(address, Math.max(length, 1))) {
            throw new BadAddressException(String.format("range 0x%x+%d is not allocated in %s", address, length, this));
        }
    }

    private void requireAllocatedPage(long vpn) {
        requireAllocated(vpn << pageShift, pageSize);
    }

    private void checkOpen() {
        if (closed) {
            throw new KernelException(this + " is closed");
        }
    }
}
