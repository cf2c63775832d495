package io.pagewire.kernel;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The emulated operating system's memory subsystem of one node: physical frames, the address spaces
 * of its endpoints, swap, page replacement, pin accounting, the fault service for NIC page faults
 * and the NetVM system buffer.
 *
 * <p>One lock (the kernel lock, like a coarse {@code mmap_lock}) guards page tables, frame ownership,
 * swap slots and pin counts, and is only ever held for bookkeeping: nothing that waits runs under
 * it. Swap reads and writes run with it released while their page is marked in transit (whoever
 * needs that page waits for the transit to end, as Linux waits on a locked page); CPU copies
 * ({@link AddressSpace#store}, {@link AddressSpace#load}) run under a DMA lock on the frame instead;
 * freeing memory waits for in-flight DMA with it released. So a fault served from swap, a long copy
 * or a DMA drain in one address space never holds up the translations of the others. The DMA engine
 * does not take it at all: it copies under per-frame DMA locks (see {@link PhysicalMemory}), which
 * reclaim respects.
 */
public final class KernelAgent implements AutoCloseable {
    /** How many victims reclaim tries before it reports memory exhausted (each try can lose a race with DMA). */
    private static final int RECLAIM_ATTEMPTS = 64;
    /** How long freeing waits for a CPU's copy into an unmapped page before it takes the guard back. */
    private static final long CPU_COPY_GRACE_NS = 20_000_000L;

    private final KernelContext context;
    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled whenever a page's transit to or from swap ends. */
    private final Condition transitEnded = lock.newCondition();
    private final PhysicalMemory memory;
    private final SwapDevice swap;
    private final FrameTable frames;
    private final PageReplacementPolicy replacement;
    private final KernelCounters counters = new KernelCounters();
    private final Map<Integer, AddressSpace> spaces = new ConcurrentHashMap<>();
    /** Accounts of named owners with an open address space. Guarded by the kernel lock. */
    private final Map<String, Account> accounts = new HashMap<>();
    private final AtomicInteger nextSpaceId = new AtomicInteger(1);
    private final SystemBuffer systemBuffer;
    private final FaultService faultService;
    private int pinnedPages;
    private boolean closed;

    private KernelAgent(KernelContext context) {
        this.context = context;
        this.memory = new PhysicalMemory(context.pageSizeBytes(), context.frameCount(), context.memoryFile(), counters);
        this.swap = new SwapDevice(context.swapFile(), context.swapBytes(), context.pageSizeBytes(), context.swapDevice());
        this.frames = new FrameTable(memory, swap);
        this.replacement = context.pageReplacement().newPolicy();
        this.systemBuffer = new SystemBuffer(this, (int) (context.systemBufferBytes() / SystemBuffer.slotBytes(context.pageSizeBytes())));
        this.faultService = new FaultService(context.name(), context.faultHandlers());
    }

    /** Starts a kernel agent with the given settings, validating them first. */
    public static KernelAgent start(KernelContext context) {
        return new KernelAgent(context.conclude());
    }

    /** Creates the address space of a new endpoint, an account of its own bounded only by the node. */
    public AddressSpace createAddressSpace() {
        return createAddressSpace(null);
    }

    /**
     * Creates the address space of a new endpoint of {@code owner} (the caller the node authenticated),
     * whose pages and pins count against that owner's share of the node; null: an account of its own,
     * bounded only by the node.
     */
    public AddressSpace createAddressSpace(String owner) {
        lock();
        try {
            if (closed) {
                throw new KernelException("kernel agent " + context.name() + " is closed");
            }
            int id = nextSpaceId.getAndIncrement();
            Account account = owner == null ? new Account("endpoint " + id, false) : accounts.computeIfAbsent(owner, o -> new Account(o, true));
            account.spaceOpened();
            AddressSpace space = new AddressSpace(this, id, account);
            spaces.put(space.id(), space);
            return space;
        } finally {
            unlock();
        }
    }

    /** The account of an owner with an open address space, or null. */
    public Account account(String owner) {
        lock();
        try {
            return accounts.get(owner);
        } finally {
            unlock();
        }
    }

    /** The most pages one account may hold, resident or in swap: its share of the frames and swap slots. */
    public int accountPageLimit() {
        return (int) (context.callerShare() * ((long) frames.frameCount() + swap.slotCount()));
    }

    /** The most pages one account may pin: its share of the node's pin limit. */
    public long accountPinLimitPages() {
        return (long) (context.callerShare() * (context.nodePinLimitBytes() / memory.pageSize()));
    }

    /** The open address space of an endpoint, or null. */
    public AddressSpace addressSpace(int id) {
        return spaces.get(id);
    }

    public KernelContext context() {
        return context;
    }

    public PhysicalMemory memory() {
        return memory;
    }

    public FaultService faultService() {
        return faultService;
    }

    public SystemBuffer systemBuffer() {
        return systemBuffer;
    }

    public KernelCounters counters() {
        return counters;
    }

    NanoClock clock() {
        return context.clock();
    }

    /** A consistent snapshot of frames, pins, swap and the system buffer. */
    public MemoryStats stats() {
        lock();
        try {
            int swapped = 0;
            for (AddressSpace space : spaces.values()) {
                swapped += space.swappedPages();
            }
            int total = frames.frameCount();
            return new MemoryStats(memory.pageSize(), total, frames.freeCount(), total - frames.freeCount(),
                    pinnedPages, context.memlockLimitBytes(), context.nodePinLimitBytes(), swap.slotCount(),
                    swap.usedCount(), swapped, systemBuffer.slotCount(), systemBuffer.slotsInUse(), spaces.size());
        } finally {
            unlock();
        }
    }

    /** Closes every address space (revoking pins, draining DMA), stops the fault service, removes swap. */
    @Override
    public void close() {
        List<AddressSpace> open;
        lock();
        try {
            if (closed) {
                return;
            }
            closed = true;
            open = new ArrayList<>(spaces.values());
        } finally {
            unlock();
        }
        for (AddressSpace space : open) {
            space.close();
        }
        faultService.close();
        swap.close();
        systemBuffer.free();
        memory.free();
    }

    // ---- mechanics shared by the address spaces (kernel lock held unless noted) ---------------

    void lock() {
        lock.lock();
    }

    void unlock() {
        lock.unlock();
    }

    /**
     * Waits, with the kernel lock released, until some page's transit ends. The caller holds the lock
     * again on return and must look again at whatever it saw before.
     */
    void awaitTransit() {
        transitEnded.awaitUninterruptibly();
    }

    /** A page's transit to or from swap ended: its waiters look again. Kernel lock held. */
    void transitEnded() {
        transitEnded.signalAll();
    }

    SwapDevice swap() {
        return swap;
    }

    long faultOverheadNs() {
        return context.faultOverheadNs();
    }

    /** Spends the fault handler's own time on one fault; the kernel lock must not be held. */
    void awaitFaultOverhead() {
        long overhead = context.faultOverheadNs();
        if (overhead > 0) {
            ModelledWait.until(System.nanoTime() + overhead, this);
        }
    }

    /**
     * Spends the CPU time that pinning or unpinning {@code pages} pages costs, on the calling thread
     * and with the kernel lock released: a busy wait, as the work it stands for (walking page tables,
     * taking page references, updating the NIC's or IOMMU's tables) is the CPU's, not a wait for a device.
     */
    void spendPinCost(long pages) {
        ModelledWait.busyFor(context.pinCostNs() * pages);
    }

    FrameTable frames() {
        return frames;
    }

    void forget(AddressSpace space) {
        spaces.remove(space.id());
        Account account = space.account();
        if (account.spaceClosed()) {
            accounts.remove(account.owner(), account);
        }
    }

    /**
     * Throws unless the account of {@code space} may hold one more page (a page about to be filled at
     * its first touch): what keeps one application from taking every frame and swap slot.
     */
    void checkPageShare(AddressSpace space, long vpn) {
        Account account = space.account();
        if (account.shared() && account.heldPages() >= accountPageLimit()) {
            counters.increment(KernelCounter.ACCOUNT_SHARE_REJECTIONS);
            throw new MemoryExhaustedException(String.format("out of memory for %s: page 0x%x of %s would be its page %d, past its share"
                    + " (%s = %.2f) of the node's %d frames and swap slots; free some first", account, vpn * memory.pageSize(), space,
                    account.heldPages() + 1, KernelConfiguration.CALLER_SHARE.name(), context.callerShare(),
                    frames.frameCount() + swap.slotCount()));
        }
    }

    /**
     * A frame for a page of {@code requester}: a free one, else one taken from another page by the
     * replacement policy. Writing a dirty victim back releases the kernel lock meanwhile, so the
     * caller looks again at its page afterwards.
     *
     * @throws MemoryExhaustedException when every frame is pinned, under DMA, or dirty with swap full
     */
    int obtainFrame(AddressSpace requester, long vpn) {
        int frame = frames.takeFree();
        if (frame >= 0) {
            return frame;
        }
        for (int attempt = 0; attempt < RECLAIM_ATTEMPTS; attempt++) {
            int victim = replacement.selectVictim(frames);
            if (victim < 0) {
                break;
            }
            if (tryEvict(victim)) {
                return victim;
            }
        }
        counters.increment(KernelCounter.OUT_OF_MEMORY);
        throw new MemoryExhaustedException(outOfMemoryMessage(requester, vpn));
    }

    /** Reclaims one frame for {@link AddressSpace#pageOut} and frees it; false when DMA holds it or swap is full. Lock held. */
    boolean pageOut(int frame) {
        if (!tryEvict(frame)) {
            return false;
        }
        frames.putFree(frame);
        return true;
    }

    /** Takes a frame from its page if no DMA got to it first and its contents have somewhere to go. */
    private boolean tryEvict(int frame) {
        if (!memory.tryBeginReclaim(frame)) {
            return false;
        }
        AddressSpace owner = frames.owner(frame);
        PageTableEntry entry = frames.ownerEntry(frame);
        long vpn = frames.ownerVpn(frame);
        boolean dirty = memory.isDirty(frame);
        int slot = entry.swapSlot;
        if (dirty && slot < 0) {
            slot = swap.allocate();
            if (slot < 0) {
                memory.abandonReclaim(frame);
                return false;
            }
        }
        int slotBefore = entry.swapSlot;
        try {
            owner.evict(vpn, entry, slot, dirty);
        } catch (RuntimeException e) {
            if (slotBefore < 0 && slot >= 0) {
                swap.release(slot);
            }
            memory.abandonReclaim(frame);
            throw e;
        }
        frames.detach(frame);
        if (dirty) {
            // The page is in transit to its slot: written with the lock released, then it is swapped out.
            RuntimeException failure = null;
            lock.unlock();
            try {
                swap.write(slot, memory, frame);
            } catch (RuntimeException e) {
                failure = e;
            } finally {
                lock.lock();
            }
            owner.writebackEnded(vpn, entry, frame, failure);
            if (failure != null) {
                // The slot's contents (new, or older than the dirty page) are of no use now.
                swap.release(slot);
                frames.attach(frame, owner, vpn, entry);
                memory.abandonReclaim(frame);
                throw failure;
            }
            memory.clearDirty(frame);
            counters.increment(KernelCounter.SWAP_OUTS);
        }
        counters.increment(KernelCounter.EVICTIONS);
        return true;
    }

    /** Returns a frame that was obtained but could not be filled (a failed swap read). */
    void returnFreeFrame(int frame) {
        frames.putFree(frame);
    }

    /**
     * Takes a frame from a page being unmapped: no new DMA may lock it, and no page owns it any more.
     * {@link #drainAndFree} then returns it to the free list.
     */
    void takeFrameFromUnmappedPage(int frame) {
        memory.beginReclaim(frame);
        frames.detach(frame);
    }

    /**
     * Waits, with the kernel lock released, until no DMA holds any of these frames taken from unmapped
     * pages, then puts them on the free list. Frames whose DMA did not drain in time stay out of use.
     */
    void drainAndFree(int[] taken, int count, AddressSpace space) {
        long start = clock().nanoTime();
        long deadline = start + context.dmaDrainTimeoutNs();
        boolean guardsTaken = false;
        int draining = busyFrame(taken, count);
        while (draining >= 0) {
            if (!guardsTaken && clock().nanoTime() - start > CPU_COPY_GRACE_NS) {
                // No CPU can still be copying into these pages in earnest: their entries went before
                // the wait began. A guard held this long belongs to a stuck or dead application.
                guardsTaken = true;
                for (int i = 0; i < count; i++) {
                    memory.takeGuardBack(taken[i]);
                }
                draining = busyFrame(taken, count);
                continue;
            }
            if (clock().nanoTime() - deadline > 0) {
                for (int i = 0; i < count; i++) {
                    if (!memory.isHeld(taken[i])) {
                        frames.putFree(taken[i]);
                    }
                }
                throw new KernelException(String.format("freeing memory of %s: DMA or a CPU copy on frame %d did not drain within %d ms",
                        space, draining, TimeUnit.NANOSECONDS.toMillis(context.dmaDrainTimeoutNs())));
            }
            lock.unlock();
            try {
                LockSupport.parkNanos(1_000);
            } finally {
                lock.lock();
            }
            draining = busyFrame(taken, count);
        }
        for (int i = 0; i < count; i++) {
            frames.putFree(taken[i]);
        }
    }

    private int busyFrame(int[] taken, int count) {
        for (int i = 0; i < count; i++) {
            if (memory.isHeld(taken[i])) {
                return taken[i];
            }
        }
        return -1;
    }

    /** Throws unless {@code additionalPages} more pinned pages fit both the memlock and the node limit. */
    void checkPinLimits(AddressSpace space, long additionalPages) {
        if (additionalPages <= 0) {
            return;
        }
        long pageSize = memory.pageSize();
        long spaceWould = (space.pinnedPages() + additionalPages) * pageSize;
        if (spaceWould > context.memlockLimitBytes()) {
            counters.increment(KernelCounter.PIN_LIMIT_REJECTIONS);
            throw new PinLimitExceededException(PinLimitExceededException.Limit.MEMLOCK, context.memlockLimitBytes(), spaceWould,
                    String.format("memlock limit %s exceeded: %s would pin %s (%s pinned now, %s more requested); the node's %s sets it",
                            ByteSizes.format(context.memlockLimitBytes()), space, ByteSizes.format(spaceWould),
                            ByteSizes.format(space.pinnedPages() * pageSize), ByteSizes.format(additionalPages * pageSize),
                            KernelConfiguration.MEMLOCK_LIMIT.name()));
        }
        long nodeWould = (pinnedPages + additionalPages) * pageSize;
        if (nodeWould > context.nodePinLimitBytes()) {
            counters.increment(KernelCounter.PIN_LIMIT_REJECTIONS);
            throw new PinLimitExceededException(PinLimitExceededException.Limit.NODE, context.nodePinLimitBytes(), nodeWould,
                    String.format("node pin limit %s exceeded: node %s would pin %s (%s pinned now, %s more requested by %s); the node's %s "
                            + "sets it (0: three quarters of %s)",
                            ByteSizes.format(context.nodePinLimitBytes()), context.name(), ByteSizes.format(nodeWould),
                            ByteSizes.format(pinnedPages * pageSize), ByteSizes.format(additionalPages * pageSize), space,
                            KernelConfiguration.NODE_PIN_LIMIT.name(), KernelConfiguration.PHYSICAL_MEMORY.name()));
        }
        Account account = space.account();
        long accountWould = account.pinnedPages() + additionalPages;
        if (account.shared() && accountWould > accountPinLimitPages()) {
            counters.increment(KernelCounter.PIN_LIMIT_REJECTIONS);
            throw new PinLimitExceededException(PinLimitExceededException.Limit.SHARE, accountPinLimitPages() * pageSize, accountWould * pageSize,
                    String.format("pin share exceeded: %s would pin %s in all (%s pinned now, %s more requested by %s), past its share"
                            + " (%s = %.2f) of the node pin limit %s", account, ByteSizes.format(accountWould * pageSize),
                            ByteSizes.format(account.pinnedPages() * pageSize), ByteSizes.format(additionalPages * pageSize), space,
                            KernelConfiguration.CALLER_SHARE.name(), context.callerShare(), ByteSizes.format(context.nodePinLimitBytes())));
        }
    }

    void pinnedPagesChanged(AddressSpace space, int delta) {
        pinnedPages += delta;
        space.account().pinned(delta);
    }

    private String outOfMemoryMessage(AddressSpace requester, long vpn) {
        int pinned = 0;
        int underDma = 0;
        int needSwap = 0;
        for (int f = 0; f < frames.frameCount(); f++) {
            PageTableEntry entry = frames.ownerEntry(f);
            if (entry == null) {
                continue;
            }
            if (entry.pinCount > 0) {
                pinned++;
            } else if (memory.isHeld(f)) {
                underDma++;
            } else if (frames.needsNewSwapSlot(f, entry)) {
                needSwap++;
            }
        }
        return String.format("out of memory: no frame for page 0x%x of %s; of %d frames, %d are pinned, %d under DMA, "
                        + "%d dirty with swap full (%d of %d slots used)",
                vpn << context.pageShift(), requester, frames.frameCount(), pinned, underDma, needSwap,
                swap.usedCount(), swap.slotCount());
    }
}
