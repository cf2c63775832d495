package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.BadAddressException;
import io.pagewire.kernel.InvalidationReason;
import io.pagewire.kernel.MemoryListener;
import io.pagewire.kernel.PinLimitExceededException;
import io.pagewire.kernel.Translation;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Consumer;

/**
 * An application's endpoint as the NIC sees it: its address space (the "process"), the memory regions
 * registered in it, its event counters and its queue pairs. Closing it releases everything: queue
 * pairs close, registrations are dropped, pins released and memory freed.
 */
public final class Endpoint implements AutoCloseable {
    private final NicServices nic;
    /** The node's regions and windows by key, where this endpoint's are published. */
    private final Regions keys;
    private final Translations translations;
    private final WorkRequests workRequests;
    /** Told once the endpoint closed (the NIC forgets it). */
    private final Consumer<Endpoint> closedListener;
    private final AddressSpace space;
    private final String name;
    private final Map<Integer, MemoryRegion> regions = new ConcurrentHashMap<>();
    private final Map<Integer, EventCounter> counters = new ConcurrentHashMap<>();
    private final List<QueuePair> queuePairs = new CopyOnWriteArrayList<>();
    /** SHADOW regions, whose resident pages the shadow page table mirrors. */
    private final List<MemoryRegion> shadowRegions = new CopyOnWriteArrayList<>();
    private final AtomicInteger nextLkey = new AtomicInteger(1);
    private final AtomicInteger nextCounterId = new AtomicInteger(1);
    private final Map<Integer, SharedReceiveQueue> sharedReceiveQueues = new ConcurrentHashMap<>();
    private final AtomicInteger nextSrqId = new AtomicInteger(1);
    private final MemoryListener listener = new Listener();
    /** Work requests posted here and not yet completed (or, for receives, consumed). */
    private final LongAdder workRequestsOutstanding = new LongAdder();
    /** Its owner's outstanding work requests, on every endpoint of the owner's. */
    private final LongAdder ownerWorkRequests;
    /** What this session's queue pairs may send together, or null when the node paces nothing. */
    private final SendAllowance sendAllowance;
    private volatile boolean closed;
    /** Told when received data lands in this endpoint's memory; null when nobody waits on it. */
    private volatile PlacementWatcher placementWatcher;
    /** Told of its queue pairs' asynchronous events; null when nobody listens. */
    private volatile QueuePairEvent.Listener queuePairEvents;

    /** What wants to know that received data landed in an endpoint's memory: a CPU may be waiting on those bytes. */
    @FunctionalInterface
    public interface PlacementWatcher {
        /** Data was written at [address, address + length); called on the NIC's delivery thread, so it must be brief. */
        void placed(long address, long length);
    }

    /** Sets (or with null, clears) who hears of data placed into this endpoint's memory. */
    public void watchPlacements(PlacementWatcher watcher) {
        placementWatcher = watcher;
    }

    /** Sets (or with null, clears) who hears this endpoint's queue pairs' asynchronous events. */
    public void listenToQueuePairs(QueuePairEvent.Listener listener) {
        queuePairEvents = listener;
    }

    /** One of this endpoint's queue pairs raised an event (no lock held). */
    void raised(int qpn, QueuePairEvent event) {
        QueuePairEvent.Listener l = queuePairEvents;
        if (l != null) {
            l.raised(qpn, event);
        }
    }

    /** Received data was written at [address, address + length). */
    void placed(long address, long length) {
        PlacementWatcher w = placementWatcher;
        if (w != null) {
            w.placed(address, length);
        }
    }

    Endpoint(EndpointResources resources, AddressSpace space, String name) {
        this.nic = resources.services();
        this.keys = resources.regions();
        this.translations = resources.translations();
        this.workRequests = resources.workRequests();
        this.closedListener = resources.closed();
        this.space = space;
        this.name = name;
        NicContext ctx = nic.context();
        this.sendAllowance = ctx.sendBytesPerSecondPerSession() == 0 ? null
                : new SendAllowance(ctx.sendBytesPerSecondPerSession(), ctx.sendBurstBytesPerSession(), nic.clock().nanoTime());
        this.ownerWorkRequests = workRequests.of(owner());
        space.addListener(listener);
    }

    /** The application whose share of the node's pools this endpoint draws on, or null (bounded only by the node). */
    public String owner() {
        return space.account().shared() ? space.account().owner() : null;
    }

    /** The endpoint id, equal to its address space's id on this node. */
    public int id() {
        return space.id();
    }

    public String name() {
        return name;
    }

    /** The endpoint's virtual memory: allocate, store, load. */
    public AddressSpace space() {
        return space;
    }

    public boolean isClosed() {
        return closed;
    }

    // ---- registration -------------------------------------------------------------------------

    /**
     * Registers [address, address + length) with the NIC.
     *
     * @throws BadAddressException if the range is not allocated
     * @throws PinLimitExceededException if PINNED would pass the memlock or node pin limit
     */
    public MemoryRegion register(long address, long length, RegistrationMode mode, Set<Access> access) {
        checkOpen();
        if (length <= 0) {
            throw new NicException("region length must be positive, was " + length);
        }
        checkAccess(access);
        space.checkAllocated(address, length);
        reserveRegion(length);
        RegionPolicy policy = keys.policy(mode);
        long[] table;
        try {
            table = policy.pinForRegistration(space, address, length);
        } catch (RuntimeException e) {
            unreserveRegion(length);
            throw e;
        }
        MemoryRegion region = new MemoryRegion(this, address, length, policy, access, nextLkey.getAndIncrement(), keys.newRkey(mode), table);
        if (table != null) {
            region.counters().pinned(table.length);
        }
        policy.registered(region);
        regions.put(region.lkey(), region);
        keys.publish(region);
        nic.counters().increment(NicCounter.REGISTRATIONS, mode);
        return region;
    }

    // ---- memory windows ---------------------------------------------------------------------------------

    /** This endpoint's memory windows, by index. */
    private final java.util.Map<Integer, MemoryWindow> windows = new java.util.concurrent.ConcurrentHashMap<>();

    /** Allocates a memory window (ibv_alloc_mw); it admits nothing until it is bound. */
    public MemoryWindow allocateWindow(MemoryWindow.Type type) {
        checkOpen();
        synchronized (quotaLock) {
            if (windows.size() >= nic.context().regionsPerSession()) {
                throw new QuotaExceededException(this + " holds " + windows.size() + " memory windows, as many as its regions may be ("
                        + NicConfiguration.REGIONS_PER_SESSION.name() + "); deallocate some first");
            }
            MemoryWindow window = keys.allocateWindow(this, type);
            windows.put(MemoryWindow.indexOf(window.rkey()), window);
            return window;
        }
    }

    /** The endpoint's window an rkey names (whatever its key), or null. */
    public MemoryWindow window(long rkey) {
        return (rkey & MemoryWindow.RKEY_BIT) == 0 ? null : windows.get(MemoryWindow.indexOf(rkey));
    }

    /** Deallocates a window (ibv_dealloc_mw): its rkey admits nothing from now on. */
    public void deallocateWindow(long rkey) {
        MemoryWindow window = window(rkey);
        if (window == null) {
            throw new NicException(String.format("rkey 0x%x names no memory window of %s", rkey, this));
        }
        windows.remove(MemoryWindow.indexOf(rkey), window);
        window.deallocate();
        keys.forget(window);
    }

    /** Registers the whole address space for on-demand paging, as {@code IBV_ACCESS_ON_DEMAND} does with address 0 and SIZE_MAX. */
    public MemoryRegion registerImplicit(Set<Access> access) {
        checkOpen();
        checkAccess(access);
        reserveRegion(0);
        MemoryRegion region = new MemoryRegion(this, 0, MemoryRegion.IMPLICIT_LENGTH, keys.policy(RegistrationMode.ON_DEMAND), access,
                nextLkey.getAndIncrement(), keys.newRkey(RegistrationMode.ON_DEMAND), null);
        regions.put(region.lkey(), region);
        keys.publish(region);
        nic.counters().increment(NicCounter.REGISTRATIONS, RegistrationMode.ON_DEMAND);
        return region;
    }

    /** ibverbs' rule: a region peers may write or do atomics on must be writable locally too (else EINVAL). */
    private static void checkAccess(Set<Access> access) {
        if ((access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC)) && !access.contains(Access.LOCAL_WRITE)) {
            throw new NicException("access " + access + " is refused: REMOTE_WRITE and REMOTE_ATOMIC need LOCAL_WRITE too, as with ibv_reg_mr");
        }
    }

    /**
     * Drops a registration: its pins are released, its translations dropped, its keys refused from now on.
     *
     * @throws NicException while memory windows are bound to it (as ibv_dereg_mr refuses)
     */
    public void deregister(MemoryRegion region) {
        if (region.windowsBound() > 0) {
            throw new NicException(region + " has " + region.windowsBound() + " memory windows bound to it: unbind or invalidate them first");
        }
        if (regions.remove(region.lkey(), region)) {
            unreserveRegion(region.implicit() ? 0 : region.length());
            release(region, "deregistered");
        }
    }

    /** Regions and registered bytes counted against the session's quotas. Guarded by quotaLock. */
    private int regionsHeld;
    private long bytesRegistered;
    private final Object quotaLock = new Object();

    private void reserveRegion(long length) {
        NicContext ctx = nic.context();
        synchronized (quotaLock) {
            if (regionsHeld >= ctx.regionsPerSession()) {
                throw new QuotaExceededException(this + " holds " + regionsHeld + " memory regions, its limit ("
                        + NicConfiguration.REGIONS_PER_SESSION.name() + "); deregister some first");
            }
            if (length > ctx.registeredBytesPerSession() - bytesRegistered) {
                throw new QuotaExceededException(this + " has " + bytesRegistered + " bytes registered; " + length + " more would pass its limit of "
                        + ctx.registeredBytesPerSession() + " (" + NicConfiguration.REGISTERED_BYTES_PER_SESSION.name() + ")");
            }
            regionsHeld++;
            bytesRegistered += length;
        }
    }

    private void unreserveRegion(long length) {
        synchronized (quotaLock) {
            regionsHeld--;
            bytesRegistered -= length;
        }
    }

    /** The region a local work request names, or null. */
    public MemoryRegion region(int lkey) {
        return regions.get(lkey);
    }

    /** The regions registered now. */
    public Collection<MemoryRegion> regions() {
        return List.copyOf(regions.values());
    }

    private void release(MemoryRegion region, String reason) {
        boolean wasUsable = region.invalidReason() == null;
        Teardown teardown = new Teardown();
        teardown.run(() -> region.invalidate(reason));
        teardown.run(() -> keys.unpublish(region));
        teardown.run(() -> region.policy().released(region, wasUsable));
        teardown.finish();
    }

    /** SHADOW regions, whose resident pages the shadow page table mirrors (its policy keeps this list). */
    List<MemoryRegion> shadowRegions() {
        return shadowRegions;
    }

    void shadowRegionAdded(MemoryRegion region) {
        shadowRegions.add(region);
    }

    void shadowRegionRemoved(MemoryRegion region) {
        shadowRegions.remove(region);
    }

    // ---- event counters -----------------------------------------------------------------------

    /** Creates an event counter that peers may notify ({@link Access#REMOTE_WRITE}) and/or FETCH_ADD ({@link Access#REMOTE_ATOMIC}). */
    public EventCounter createEventCounter(Set<Access> access) {
        checkOpen();
        if (counters.size() >= nic.context().countersPerSession()) {
            throw new QuotaExceededException(this + " holds " + counters.size() + " event counters, its limit ("
                    + NicConfiguration.COUNTERS_PER_SESSION.name() + "); destroy some first");
        }
        EventCounter counter = new EventCounter(nextCounterId.getAndIncrement(), this, access);
        counters.put(counter.id(), counter);
        return counter;
    }

    /** Removes an event counter: notifications and FETCH_ADDs naming it are refused from now on. */
    public void destroyEventCounter(EventCounter counter) {
        counters.remove(counter.id(), counter);
    }

    /** The event counter with this id, or null. */
    public EventCounter eventCounter(int id) {
        return counters.get(id);
    }

    // ---- shared receive queues ----------------------------------------------------------------------

    /** Creates a shared receive queue that queue pairs of this endpoint can be created on. */
    public SharedReceiveQueue createSharedReceiveQueue() {
        checkOpen();
        SharedReceiveQueue srq = new SharedReceiveQueue(nextSrqId.getAndIncrement(), this, nic.context().cqCapacity());
        sharedReceiveQueues.put(srq.id(), srq);
        return srq;
    }

    /** The shared receive queue with this id, or null. */
    public SharedReceiveQueue sharedReceiveQueue(int id) {
        return sharedReceiveQueues.get(id);
    }

    void forget(SharedReceiveQueue srq) {
        sharedReceiveQueues.remove(srq.id(), srq);
    }

    // ---- prefetch -----------------------------------------------------------------------------

    /**
     * Brings pages of a region in and makes their translations ready ahead of use, like
     * {@code ibv_advise_mr}. PREFETCH and PREFETCH_WRITE fault non-resident pages in (for reading or
     * writing); PREFETCH_NO_FAULT only makes translations of pages already resident.
     *
     * @return completes when every page was dealt with
     */
    public CompletableFuture<Void> advise(MemoryRegion region, long address, long length, Advice advice) {
        checkOpen();
        if (region.endpoint() != this || region.invalidReason() != null) {
            throw new NicException(region + " cannot be advised: " + (region.endpoint() != this ? "not registered on endpoint " + id()
                    : region.invalidReason()));
        }
        if (!region.covers(address, length)) {
            throw new NicException(String.format("advise range 0x%x+%d is outside %s", address, length, region));
        }
        if (length <= 0 || address + length < address) {
            throw new NicException(String.format("advise range 0x%x+%d is empty or wraps", address, length));
        }
        space.checkAllocated(address, length);
        int shift = space.pageShift();
        long firstVpn = address >>> shift;
        long span = ((address + length - 1) >>> shift) - firstVpn + 1;
        int frames = nic.kernel().memory().frameCount();
        if (span > frames) {
            // One request must not hold the node for minutes: more than memory cannot be brought in at once anyway.
            throw new NicException("advise covers " + span + " pages; at most the node's physical memory (" + frames
                    + " pages) can be prefetched at once: advise a smaller range");
        }
        return region.policy().advise(region, firstVpn, (int) span, advice);
    }

    /** What {@link #advise} should do, after {@code ibv_advise_mr_advice}. */
    public enum Advice {
        PREFETCH,
        PREFETCH_WRITE,
        PREFETCH_NO_FAULT
    }

    // ---- queue pairs and lifetime ---------------------------------------------------------------

    void attach(QueuePair qp) {
        queuePairs.add(qp);
    }

    /** The pacer this session's requesters consult before each packet, or null when it sends unpaced. */
    SendAllowance sendAllowance() {
        return sendAllowance;
    }

    void detach(QueuePair qp) {
        queuePairs.remove(qp);
    }

    /**
     * Counts one more outstanding work request against this session's limit and the node's, or
     * refuses it (RESOURCE_EXHAUSTED) with nothing counted. Striped counts, checked against their sum
     * (see {@link WorkRequests}).
     */
    void admitWorkRequest(long wrId) {
        int limit = nic.context().workRequestsPerSession();
        if (workRequestsOutstanding.sum() >= limit) {
            throw new QuotaExceededException("work request " + wrId + ": " + this + " has " + limit + " work requests outstanding, its limit ("
                    + NicConfiguration.WORK_REQUESTS_PER_SESSION.name() + "); reap completions first");
        }
        workRequests.admit(wrId, owner(), ownerWorkRequests);
        workRequestsOutstanding.increment();
    }

    /** A receive taken and given back: counted as outstanding again, past the limits (it was admitted before). */
    void recountWorkRequest() {
        workRequestsOutstanding.increment();
        workRequests.recount(ownerWorkRequests);
    }

    /** Work requests completed, failed or flushed (receives: consumed). */
    void retireWorkRequests(int n) {
        workRequestsOutstanding.add(-n);
        workRequests.retire(n, ownerWorkRequests);
    }

    /** Work requests posted here and not yet completed (or, for receives, consumed). */
    public int workRequestsOutstanding() {
        return (int) workRequestsOutstanding.sum();
    }

    /** How many queue pairs the endpoint holds (without copying them). */
    public int queuePairCount() {
        return queuePairs.size();
    }

    public List<QueuePair> queuePairs() {
        return List.copyOf(queuePairs);
    }

    /** Closes queue pairs, drops registrations, releases pins and frees the endpoint's memory: the process exited. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        Teardown teardown = new Teardown();
        for (QueuePair qp : queuePairs) {
            teardown.run(qp::close);
        }
        for (SharedReceiveQueue srq : sharedReceiveQueues.values()) {
            teardown.run(srq::destroy);
        }
        for (MemoryWindow window : List.copyOf(windows.values())) {
            teardown.run(() -> deallocateWindow(window.rkey()));
        }
        for (MemoryRegion region : List.copyOf(regions.values())) {
            teardown.run(() -> deregister(region));
        }
        teardown.run(() -> space.removeListener(listener));
        teardown.run(space::close);
        teardown.run(() -> closedListener.accept(this));
        teardown.finish();
    }

    private void checkOpen() {
        if (closed) {
            throw new NicException("endpoint " + id() + " is closed");
        }
    }

    private boolean inShadowRegion(long vpn) {
        for (MemoryRegion region : shadowRegions) {
            if (region.overlapsPages(vpn, 1)) {
                return true;
            }
        }
        return false;
    }

    @Override
    public String toString() {
        return "endpoint " + id() + (name.isEmpty() ? "" : " (" + name + ")");
    }

    /** The kernel's notifier for this endpoint's memory; runs under the kernel lock, takes only NIC table locks. */
    private final class Listener implements MemoryListener {
        @Override
        public void mapped(AddressSpace s, long vpn, Translation translation) {
            if (!shadowRegions.isEmpty() && inShadowRegion(vpn)) {
                translations.shadow.map(Tlb.key(id(), vpn), translation);
            }
        }

        @Override
        public void invalidate(AddressSpace s, long firstVpn, long pageCount, InvalidationReason reason) {
            // Pins of dropped PIN_ON_MISS entries are revoked by the kernel on UNMAP; eviction never hits pinned pages.
            translations.onDemand.invalidate(id(), firstVpn, pageCount);
            int dropped = translations.tlb.invalidate(id(), firstVpn, pageCount).dropped;
            dropped += translations.shadow.invalidate(id(), firstVpn, pageCount);
            nic.counters().add(NicCounter.INVALIDATED_TRANSLATIONS, dropped);
            if (dropped == 0 && reason != InvalidationReason.UNMAP) {
                return; // the common eviction: nothing of this endpoint's was translated, no region to look at
            }
            for (MemoryRegion region : regions.values()) {
                boolean overlaps = !region.implicit() && region.overlapsPages(firstVpn, pageCount);
                if (dropped > 0 && (overlaps || region.implicit())) {
                    region.counters().invalidated(dropped);
                }
                if (overlaps && reason == InvalidationReason.UNMAP) {
                    region.invalidate("its memory was freed while it was registered");
                }
            }
        }
    }
}
