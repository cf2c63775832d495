package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.FaultKind;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelConfiguration;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.NanoClock;
import java.security.SecureRandom;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.LongAdder;

/**
 * The emulated user-level NIC of one node: its TLB and shadow page table, the DMA engine, the memory
 * regions and event counters of its endpoints, its queue pairs and completion queues, and the receive
 * credits it grants. Packets reach it through {@link #receive} and leave through a
 * {@link PacketTransport}; it knows nothing of how they travel.
 */
public final class Nic implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Nic.class.getName());
    private static final long RKEY_MODE_MASK = 3L;

    private final String nodeId;
    private final KernelAgent kernel;
    private final NicContext context;
    private final NicCounters counters = new NicCounters();
    private final NanoClock clock;
    private final NicTimers timers;
    private final Tlb tlb;
    private final ShadowPageTable shadow = new ShadowPageTable();
    private final OnDemandPageTable onDemandPageTable = new OnDemandPageTable();
    private final DmaEngine dma;
    private final MemoryPressure pressure;
    /** Replaced whole when an experiment resizes it; read once per lookup. */
    private volatile ContextCache contexts;
    private final CreditPool credits;
    /** Credits a queue pair is granted when created: what one MTU-sized packet may need; it borrows more as it uses them. */
    private final int firstCredits;
    private final Map<Integer, Endpoint> endpoints = new ConcurrentHashMap<>();
    private final Map<Integer, QueuePair> queuePairs = new ConcurrentHashMap<>();
    private final Map<Long, MemoryRegion> regionsByRkey = new ConcurrentHashMap<>();
    private final ResponderFaults responderFaults = new ResponderFaults(this);
    /** What each registration mode does with a region's pages, by the mode's ordinal. */
    private final RegionPolicy[] policies;
    private final AtomicInteger nextQpn = new AtomicInteger(1);
    private final AtomicInteger nextCqId = new AtomicInteger(1);
    private final SecureRandom keys = new SecureRandom();
    private final long sweepIntervalNs;
    private final PacketRouter router;
    private volatile CompletionObserver completionObserver = (opcode, mode, status, bytes, latencyNs) -> { };
    private volatile FaultObserver faultObserver = (side, kind, mode, serviceNs) -> { };
    private volatile WaitObserver waitObserver = (cause, nanos) -> { };
    private volatile boolean closed;
    /** What responders answer a request that meets a NIC page fault; settable while the node runs, for fault experiments. */
    private volatile FaultAnswer faultAnswer;
    /** Whether the timeout sweep is scheduled: only while some pair has work queued, so an idle NIC never wakes. */
    private final AtomicBoolean sweepArmed = new AtomicBoolean();
    /** Multicast groups by LID: the UD pairs of this NIC attached to each. */
    private final Map<Integer, Set<QueuePair>> multicastGroups = new ConcurrentHashMap<>();

    /**
     * @param transport how packets leave; may be set later through {@link PacketRouter#attach} when the transport needs the NIC first
     */
    public Nic(String nodeId, KernelAgent kernel, NicContext context, NicTimers timers, PacketTransport transport) {
        this.nodeId = nodeId;
        this.kernel = kernel;
        this.context = context.conclude();
        this.clock = context.clock();
        this.timers = guarded(timers);
        int pageSize = kernel.memory().pageSize();
        int slotBytes = kernel.systemBuffer().slotBytes();
        if (Math.min(context.mtuBytes(), pageSize) > slotBytes) {
            throw new IllegalArgumentException(NicConfiguration.MTU.name() + " must be at most " + slotBytes + " with " + pageSize
                    + "-byte pages: a received part parks in one system-buffer slot, which is a page, and 64 KiB with larger pages; was "
                    + context.mtuBytes());
        }
        int partsPerPacket = Credits.perPacket(context.mtuBytes(), Integer.numberOfTrailingZeros(pageSize));
        if (context.creditsPerQp() < partsPerPacket) {
            throw new IllegalArgumentException(NicConfiguration.CREDITS_PER_QP.name() + " must be at least " + partsPerPacket
                    + " (the page-sized parts one MTU-sized packet can touch), was " + context.creditsPerQp());
        }
        this.tlb = new Tlb(context.tlbEntries(), context.tlbWays(), context.tlbReplacement(), context.tlbIndexing(), context.randomSeed());
        this.policies = new RegionPolicy[] {new PinnedPolicy(this), new PinOnMissPolicy(this), new ShadowPolicy(this), new OnDemandPolicy(this)};
        this.contexts = new ContextCache(context.contextCacheEntries(), context.contextCacheWays(), context.contextCacheMissNs(), counters);
        this.pressure = new MemoryPressure(this, context.reclaimAfterAccess(), context.reclaimDepth(), context.randomSeed());
        this.dma = new DmaEngine(kernel.memory(), pressure);
        this.faultAnswer = context.faultAnswer();
        this.firstCredits = partsPerPacket;
        this.credits = new CreditPool(kernel.systemBuffer().slotCount(), kernel.context().callerShare());
        this.sweepIntervalNs = Math.max(1_000_000, Math.min(context.ackTimeoutNs(), context.minAckTimeoutNs()) / 4);
        this.router = new PacketRouter(this, transport);
    }

    /** Receives the service time of every page fault the NIC has served from now on (the metrics layer). */
    public void observeFaults(FaultObserver observer) {
        faultObserver = observer;
    }

    /** Receives the length of every stall, parking, RNR back-off and credit wait from now on (the metrics layer). */
    public void observeWaits(WaitObserver observer) {
        waitObserver = observer;
    }

    /** One of the NIC's waits ended after {@code nanos}. */
    void waited(WaitCause cause, long nanos) {
        waitObserver.waited(cause, nanos);
    }

    /** Receives the latency of every finished work request from now on (the metrics layer). */
    public void observeCompletions(CompletionObserver observer) {
        completionObserver = observer;
    }

    void observeCompletion(Completion.Opcode opcode, RegistrationMode mode, CompletionStatus status, long bytes, long latencyNs) {
        completionObserver.completed(opcode, mode, status, bytes, latencyNs);
    }


    public String nodeId() {
        return nodeId;
    }

    public KernelAgent kernel() {
        return kernel;
    }

    public NicContext context() {
        return context;
    }

    public NicCounters counters() {
        return counters;
    }

    /** The NIC's port to the wire: where packets arrive, leave, and wait for a lane. */
    public PacketRouter router() {
        return router;
    }

    // ---- resources ------------------------------------------------------------------------------

    /** Opens an endpoint: a fresh address space on the node, and the NIC's view of it; an account of its own. */
    public Endpoint openEndpoint(String name) {
        return openEndpoint(name, null);
    }

    /**
     * Opens an endpoint of {@code owner} (the application the node authenticated): its pages, pins and
     * receive credits count against that owner's share of the node's pools; null: an account of its own.
     */
    public Endpoint openEndpoint(String name, String owner) {
        checkOpen();
        AddressSpace space = kernel.createAddressSpace(owner);
        Endpoint endpoint = new Endpoint(this, space, name == null ? "" : name);
        endpoints.put(endpoint.id(), endpoint);
        return endpoint;
    }

    public Endpoint endpoint(int id) {
        return endpoints.get(id);
    }

    public List<Endpoint> endpoints() {
        return List.copyOf(endpoints.values());
    }

    /** The credits a new queue pair grants its peer (its address's initial credits). */
    public int firstCredits() {
        return firstCredits;
    }

    public CompletionQueue createCompletionQueue() {
        return new CompletionQueue(nextCqId.getAndIncrement(), context.cqCapacity());
    }

    /**
     * Creates a queue pair on an endpoint, reserving its receive credits from the system buffer.
     *
     * @throws NicException if the system buffer has no credits left to grant
     */
    public QueuePair createQueuePair(Endpoint endpoint, CompletionQueue cq) {
        return createQueuePair(endpoint, cq, null);
    }

    /**
     * Creates a queue pair whose arriving SENDs draw receives from a shared receive queue of the same
     * endpoint (null: its own receive queue).
     */
    public QueuePair createQueuePair(Endpoint endpoint, CompletionQueue cq, SharedReceiveQueue srq) {
        return createQueuePair(endpoint, cq, srq, QueuePair.Transport.RC);
    }

    /** As {@link #createQueuePair(Endpoint, CompletionQueue, SharedReceiveQueue)}, of the transport given (RC or UC). */
    public QueuePair createQueuePair(Endpoint endpoint, CompletionQueue cq, SharedReceiveQueue srq, QueuePair.Transport transport) {
        checkOpen();
        if (srq != null && (srq.endpoint() != endpoint || srq.isClosed())) {
            throw new NicException(srq + (srq.isClosed() ? " was destroyed" : " belongs to another endpoint than " + endpoint));
        }
        if (endpoint.isClosed()) {
            throw new NicException(endpoint + " is closed");
        }
        if (endpoint.queuePairCount() >= context.queuePairsPerSession()) {
            throw new QuotaExceededException(endpoint + " holds " + endpoint.queuePairCount() + " queue pairs, its limit ("
                    + NicConfiguration.QUEUE_PAIRS_PER_SESSION.name() + "); destroy some first");
        }
        String owner = endpoint.owner();
        credits.reserve(owner, firstCredits);
        QueuePair qp = new QueuePair(this, endpoint, cq, nextQpn.getAndIncrement(), srq,
                new Credits(this, credits, owner, firstCredits, context.creditsPerQp()), firstCredits, transport);
        queuePairs.put(qp.qpn(), qp);
        endpoint.attach(qp);
        return qp;
    }

    /**
     * RESET, after {@code ibv_modify_qp}: the pair's number now names a fresh pair in INIT with the same
     * endpoint, completion queue and shared receive queue, to be connected again. What the old one still
     * had posted is dropped without completions, as RESET drops it; its timers and parked data end with it.
     *
     * @return the fresh pair
     * @throws QuotaExceededException when the owner's share of the credit pool cannot fund a fresh pair
     */
    public QueuePair reset(QueuePair old) {
        checkOpen();
        Endpoint endpoint = old.endpoint();
        if (endpoint.isClosed()) {
            throw new NicException(endpoint + " is closed");
        }
        String owner = endpoint.owner();
        credits.reserve(owner, firstCredits);
        QueuePair fresh = new QueuePair(this, endpoint, old.completionQueue(), old.qpn(), old.sharedReceiveQueue(),
                new Credits(this, credits, owner, firstCredits, context.creditsPerQp()), firstCredits, old.transport());
        fresh.protectionDomain(old.protectionDomain()); // the pair's PD is the object's, not its state's
        old.discard();
        queuePairs.put(fresh.qpn(), fresh);
        endpoint.attach(fresh);
        return fresh;
    }

    public QueuePair queuePair(int qpn) {
        return queuePairs.get(qpn);
    }

    public List<QueuePair> queuePairs() {
        return List.copyOf(queuePairs.values());
    }

    /** A memory region by the key peers use, or null. */
    public MemoryRegion regionByRkey(long rkey) {
        return regionsByRkey.get(rkey);
    }

    /** TLB entries holding a PIN_ON_MISS pin right now (never more than the entries). */
    public int tlbPinnedEntries() {
        return tlb.pinnedEntries();
    }

    public int tlbEntries() {
        return tlb.entries();
    }

    public int tlbValidEntries() {
        return tlb.validEntries();
    }

    public int shadowEntries() {
        return shadow.size();
    }

    /** Receive credits granted to queue pairs, and the total the system buffer backs. */
    public int creditsGranted() {
        return credits.granted();
    }

    public int creditsTotal() {
        return credits.total();
    }

    // ---- shared mechanics -------------------------------------------------------------------------

    Tlb tlb() {
        return tlb;
    }

    /** Contexts the NIC's context cache holds now (0: none modelled). */
    public int contextCacheEntries() {
        return contexts.entries();
    }

    /** The NIC's cache of queue pair and region contexts (none unless configured). */
    ContextCache contexts() {
        return contexts;
    }

    /**
     * Replaces the context cache with an empty one of {@code entries} (0: none) in sets of {@code ways},
     * a miss costing {@code missNs}: for experiments that sweep its size on one running node, as
     * {@code pagewire.nic.contextCache*} set it at start.
     */
    public void contextCache(int entries, int ways, long missNs) {
        NicConfiguration.CONTEXT_CACHE_ENTRIES.check(entries);
        NicConfiguration.CONTEXT_CACHE_WAYS.check(ways);
        NicConfiguration.CONTEXT_CACHE_MISS.check(missNs);
        if (!ContextCache.shapeFits(entries, ways)) {
            throw new IllegalArgumentException(NicConfiguration.CONTEXT_CACHE_WAYS.name() + " must be from 1 to the context cache's entries ("
                    + entries + ") and divide them, was " + ways);
        }
        this.contexts = new ContextCache(entries, ways, missNs, counters);
    }

    /** What responders answer a request that meets a NIC page fault. */
    public FaultAnswer faultAnswer() {
        return faultAnswer;
    }

    /** Sets what responders answer a request that meets a NIC page fault, from the next such request on. */
    public void faultAnswer(FaultAnswer answer) {
        this.faultAnswer = Objects.requireNonNull(answer, "a fault answer");
    }

    /** The injected memory pressure on pages peers touch (off unless configured). */
    public MemoryPressure memoryPressure() {
        return pressure;
    }

    OnDemandPageTable onDemandPageTable() {
        return onDemandPageTable;
    }

    ShadowPageTable shadow() {
        return shadow;
    }

    DmaEngine dma() {
        return dma;
    }

    NanoClock clock() {
        return clock;
    }

    NicTimers timers() {
        return timers;
    }

    /** Counts a served fault by the side it was on and tells the fault observer how long it took. */
    void countFault(MemoryRegion region, Side side, FaultKind kind, long serviceNs) {
        RegistrationMode mode = region.mode();
        boolean major = kind == FaultKind.MAJOR;
        region.counters().fault(major);
        NicCounter counter = switch (side) {
            case SEND, READ_SOURCE -> major ? NicCounter.SEND_FAULTS_MAJOR : NicCounter.SEND_FAULTS_MINOR;
            case RECEIVE, READ_TARGET, ATOMIC_TARGET -> major ? NicCounter.RECEIVE_FAULTS_MAJOR : NicCounter.RECEIVE_FAULTS_MINOR;
            case RECEIVE_BUFFER -> major ? NicCounter.RECEIVE_BUFFER_FAULTS_MAJOR : NicCounter.RECEIVE_BUFFER_FAULTS_MINOR;
            case PREFETCH -> major ? NicCounter.PREFETCH_FAULTS_MAJOR : NicCounter.PREFETCH_FAULTS_MINOR;
        };
        counters.increment(counter, mode);
        faultObserver.served(side, kind, mode, serviceNs);
    }

    /** The faults raised for peers' requests (receive targets, READ sources). */
    ResponderFaults responderFaults() {
        return responderFaults;
    }

    /** What a registration mode does with a region's pages. */
    RegionPolicy policy(RegistrationMode mode) {
        return policies[mode.ordinal()];
    }

    /**
     * The timers with every task guarded: a scheduled executor keeps a task's exception in a future
     * nobody reads, and a sweep that threw would never have rescheduled itself. A failure is logged
     * and counted; the timers go on.
     */
    private NicTimers guarded(NicTimers inner) {
        return new NicTimers() {
            @Override
            public void schedule(long delayNs, Runnable task) {
                inner.schedule(delayNs, () -> {
                    try {
                        task.run();
                    } catch (RuntimeException e) {
                        counters.increment(NicCounter.TIMER_TASK_FAILURES);
                        LOG.log(System.Logger.Level.ERROR, "a timer task of the NIC of node " + nodeId + " failed", e);
                    }
                });
            }

            @Override
            public void close() {
                inner.close();
            }
        };
    }

    /** Releases the pin a PIN_ON_MISS entry held when the TLB replaced it. */
    void unpinEvicted(long key) {
        AddressSpace space = kernel.addressSpace((int) (key >>> 40));
        if (space == null) {
            return; // its endpoint closed, revoking every pin
        }
        releasePin(space, key & ((1L << 40) - 1));
    }

    /**
     * Gives back a pin the NIC took. A space closed or a page freed meanwhile took its pins with it; a
     * page that is still there and not pinned means the NIC's pin accounting is wrong, which is
     * logged and counted rather than swallowed.
     */
    void releasePin(AddressSpace space, long vpn) {
        try {
            space.unpin(vpn);
        } catch (KernelException e) {
            // Closed meanwhile: every pin went with it.
        } catch (IllegalStateException e) {
            if (!space.isClosed() && space.isAllocated(vpn << space.pageShift(), 1)) {
                counters.increment(NicCounter.PIN_ACCOUNTING_ERRORS);
                LOG.log(System.Logger.Level.WARNING, "the NIC released a pin it did not hold: " + e.getMessage(), e);
            }
        }
    }

    /** Drops TLB translations of a range (deregistration), releasing the pins PIN_ON_MISS entries held. */
    void dropTranslations(AddressSpace space, long firstVpn, long pages) {
        Tlb.Invalidated dropped = tlb.invalidate(space.id(), firstVpn, pages);
        for (int i = 0; i < dropped.pinnedCount; i++) {
            unpinEvicted(dropped.pinnedKeys[i]);
        }
    }

    /**
     * A fresh rkey: 32 bits, as verbs programs carry them ({@code ibv_mr.rkey}): 30 random bits, and in
     * the low two bits the region's registration mode (as a real NIC's keys carry index bits), so a
     * requester knows which writes may park in the system buffer and must spend credits.
     */
    long newRkey(RegistrationMode mode) {
        while (true) {
            // Bit 31 stays clear: it marks a memory window's rkey.
            long rkey = (Integer.toUnsignedLong(keys.nextInt()) & ~RKEY_MODE_MASK & ~MemoryWindow.RKEY_BIT) | mode.ordinal();
            if ((rkey & ~RKEY_MODE_MASK) != 0 && !regionsByRkey.containsKey(rkey)) {
                return rkey;
            }
        }
    }

    /** Memory windows of every endpoint, by index: what a window rkey names. */
    private final Map<Integer, MemoryWindow> windowsByIndex = new ConcurrentHashMap<>();
    private final AtomicInteger nextWindowIndex = new AtomicInteger(1);

    /** A fresh window of {@code endpoint}'s, under a new index (23 bits, then the key's 8). */
    MemoryWindow allocateWindow(Endpoint endpoint, MemoryWindow.Type type) {
        for (int tries = 0; tries < (1 << 23); tries++) {
            int index = nextWindowIndex.getAndUpdate(i -> i + 1 >= (1 << 23) ? 1 : i + 1);
            MemoryWindow window = new MemoryWindow(endpoint, type, index);
            if (windowsByIndex.putIfAbsent(index, window) == null) {
                return window;
            }
        }
        throw new QuotaExceededException("node " + nodeId + " has every memory window index in use");
    }

    void forget(MemoryWindow window) {
        windowsByIndex.remove(MemoryWindow.indexOf(window.rkey()), window);
    }

    /** The window a window rkey names (whatever its key), or null. */
    MemoryWindow windowByRkey(long rkey) {
        return windowsByIndex.get(MemoryWindow.indexOf(rkey));
    }

    /** Whether an rkey names a memory window rather than a region. */
    static boolean isWindowRkey(long rkey) {
        return (rkey & MemoryWindow.RKEY_BIT) != 0;
    }

    /** The registration mode a region's rkey names in its low bits. */
    static RegistrationMode modeOfRkey(long rkey) {
        return MODES[(int) (rkey & RKEY_MODE_MASK)];
    }

    /** values() copies its array on every call; the per-packet path reads this one. */
    private static final RegistrationMode[] MODES = RegistrationMode.values();

    void publish(MemoryRegion region) {
        regionsByRkey.put(region.rkey(), region);
    }

    void unpublish(MemoryRegion region) {
        regionsByRkey.remove(region.rkey(), region);
    }

    /**
     * Work requests outstanding on every endpoint of this node. Striped (a post and its completion run
     * on different threads): the limit is checked against the sum, so concurrent posters may pass it by
     * a few, which is all a bound on the node's heap needs.
     */
    private final LongAdder workRequestsOutstanding = new LongAdder();

    /** Work requests outstanding by owner (application), striped as the node's count is. */
    private final Map<String, LongAdder> workRequestsByOwner = new ConcurrentHashMap<>();

    /** The count of an owner's outstanding work requests, shared by its endpoints; null for no owner. */
    LongAdder workRequestsOf(String owner) {
        return owner == null ? null : workRequestsByOwner.computeIfAbsent(owner, o -> new LongAdder());
    }

    /**
     * Counts one more outstanding work request against the node's limit and its owner's share of it
     * ({@code pagewire.quota.callerShare}), or refuses it.
     */
    void admitWorkRequest(long wrId, String owner, LongAdder ownerCount) {
        int limit = context.workRequestsPerNode();
        if (workRequestsOutstanding.sum() >= limit) {
            throw new QuotaExceededException("work request " + wrId + ": node " + nodeId + " has " + limit
                    + " work requests outstanding, its limit (" + NicConfiguration.WORK_REQUESTS_PER_NODE.name() + "); try again later");
        }
        long share = Math.max(1, (long) (limit * kernel.context().callerShare()));
        if (ownerCount != null && ownerCount.sum() >= share) {
            throw new QuotaExceededException("work request " + wrId + ": " + owner + " has " + share + " work requests outstanding on node "
                    + nodeId + ", its share (" + KernelConfiguration.CALLER_SHARE.name() + ") of the node's " + limit + "; reap completions first");
        }
        workRequestsOutstanding.increment();
        if (ownerCount != null) {
            ownerCount.increment();
        }
    }

    void recountWorkRequest(LongAdder ownerCount) {
        workRequestsOutstanding.increment();
        if (ownerCount != null) {
            ownerCount.increment();
        }
    }

    void retireWorkRequests(int n, LongAdder ownerCount) {
        workRequestsOutstanding.add(-n);
        if (ownerCount != null) {
            ownerCount.add(-n);
        }
    }

    /** Work requests posted on this node and not yet completed (or, for receives, consumed). */
    public int workRequestsOutstanding() {
        return (int) workRequestsOutstanding.sum();
    }

    void forget(Endpoint endpoint) {
        endpoints.remove(endpoint.id(), endpoint);
        onDemandPageTable.invalidateAll(endpoint.id());
    }

    void forget(QueuePair qp) {
        queuePairs.remove(qp.qpn(), qp);
        router.forget(qp);
        for (Set<QueuePair> members : multicastGroups.values()) {
            members.remove(qp);
        }
    }

    /**
     * Attaches a UD pair to the multicast group {@code lid}, as {@code ibv_attach_mcast}: datagrams
     * any node sends to the group reach it from now on.
     *
     * @throws NicException for a pair that is not UD, a LID that is no group's, or a pair already attached
     */
    public void attachMulticast(QueuePair qp, int lid) {
        checkMulticast(qp, lid);
        if (!multicastGroups.computeIfAbsent(lid, l -> ConcurrentHashMap.newKeySet()).add(qp)) {
            throw new NicException("queue pair " + qp.qpn() + " is attached to multicast group " + lid + " already");
        }
    }

    /** Detaches a UD pair from the multicast group {@code lid}; a NicException when it is not attached. */
    public void detachMulticast(QueuePair qp, int lid) {
        checkMulticast(qp, lid);
        Set<QueuePair> members = multicastGroups.get(lid);
        if (members == null || !members.remove(qp)) {
            throw new NicException("queue pair " + qp.qpn() + " is not attached to multicast group " + lid);
        }
    }

    private static void checkMulticast(QueuePair qp, int lid) {
        if (qp.transport() != QueuePair.Transport.UD) {
            throw new NicException("queue pair " + qp.qpn() + " is " + qp.transport() + ": only UD queue pairs join multicast groups");
        }
        if (!Lids.isMulticast(lid)) {
            throw new NicException("LID " + lid + " is no multicast group's (0xC000 to 0xFFFE)");
        }
    }

    /** The pairs of this NIC attached to multicast group {@code lid}. */
    Set<QueuePair> multicastMembers(int lid) {
        Set<QueuePair> members = multicastGroups.get(lid);
        return members == null ? Set.of() : members;
    }

    /** A pair has work queued: the timeout sweep runs from now until every pair is idle again. */
    void armSweep() {
        if (!closed && sweepArmed.compareAndSet(false, true)) {
            timers.schedule(sweepIntervalNs, this::sweep);
        }
    }

    /**
     * The acknowledgement-timeout sweep over every queue pair; reschedules itself while any pair has
     * work. Disarming looks again after clearing the flag: a pair that queued work in between either
     * is seen here or sees the flag clear and arms the sweep itself.
     */
    private void sweep() {
        if (closed) {
            return;
        }
        long now = clock.nanoTime();
        boolean wanted = false;
        for (QueuePair qp : queuePairs.values()) {
            try {
                qp.checkTimeout(now);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "timeout check of " + qp + " failed", e);
            }
            wanted |= qp.sweepWanted();
        }
        if (wanted) {
            timers.schedule(sweepIntervalNs, this::sweep);
            return;
        }
        sweepArmed.set(false);
        for (QueuePair qp : queuePairs.values()) {
            if (qp.sweepWanted()) {
                armSweep();
                return;
            }
        }
    }

    private void checkOpen() {
        if (closed) {
            throw new NicException("the NIC of node " + nodeId + " is closed");
        }
    }

    /** Closes every endpoint (releasing pins and memory) and stops the timers. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        Teardown teardown = new Teardown();
        for (Endpoint endpoint : endpoints.values()) {
            teardown.run(endpoint::close);
        }
        teardown.run(router::close);
        teardown.run(timers::close);
        teardown.finish();
    }
}
