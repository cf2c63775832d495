package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.NanoClock;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The emulated user-level NIC of one node: its TLB and shadow page table, the DMA engine, the memory
 * regions and event counters of its endpoints, its queue pairs and completion queues, and the receive
 * credits it grants. Packets reach it through {@link #receive} and leave through a
 * {@link PacketTransport}; it knows nothing of how they travel.
 */
public final class Nic implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Nic.class.getName());

    private final String nodeId;
    private final KernelAgent kernel;
    private final NicContext context;
    private final NicCounters counters = new NicCounters();
    private final NanoClock clock;
    private final NicTimers timers;
    private final Translations translations;
    private final DmaEngine dma;
    private final MemoryPressure pressure;
    /** Replaced whole when an experiment resizes it; read once per lookup. */
    private final ContextCaches contexts;
    private final CreditPool credits;
    /** Credits a queue pair is granted when created: what one MTU-sized packet may need; it borrows more as it uses them. */
    private final int firstCredits;
    private final Map<Integer, Endpoint> endpoints = new ConcurrentHashMap<>();
    private final QueuePairTable queuePairs = new QueuePairTable();
    private final ResponderFaults responderFaults;
    /** Regions and windows by key, and what each registration mode does with a region's pages. */
    private final Regions regions;
    private final WorkRequests workRequests;
    /** What every queue pair and every endpoint gets: built once, handed to each instead of the NIC. */
    private final QueuePairResources queuePairResources;
    private final EndpointResources endpointResources;
    private final AtomicInteger nextQpn = new AtomicInteger(1);
    private final AtomicInteger nextCqId = new AtomicInteger(1);
    private final long sweepIntervalNs;
    private final PacketRouter router;
    private final NicObservers observers = new NicObservers(counters);
    /** What the NIC's parts call: made once, handed to each of them instead of the NIC. */
    private final NicServices services;
    private volatile boolean closed;
    /** What responders answer a request that meets a NIC page fault; settable while the node runs, for fault experiments. */
    private volatile FaultAnswer faultAnswer;
    /** Whether the timeout sweep is scheduled: only while some pair has work queued, so an idle NIC never wakes. */
    private final AtomicBoolean sweepArmed = new AtomicBoolean();

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
        this.translations = new Translations(kernel, counters,
                new Tlb(context.tlbEntries(), context.tlbWays(), context.tlbReplacement(), context.tlbIndexing(), context.randomSeed()));
        this.contexts = new ContextCaches(new ContextCache(context.contextCacheEntries(), context.contextCacheWays(),
                context.contextCacheMissNs(), counters));
        this.pressure = new MemoryPressure(kernel, counters, translations, context.reclaimAfterAccess(), context.reclaimDepth(),
                context.randomSeed());
        this.dma = new DmaEngine(kernel.memory(), pressure);
        this.services = new NicServices(nodeId, this.context, clock, this.timers, counters, kernel, dma, contexts, observers);
        this.responderFaults = new ResponderFaults(services);
        this.router = new PacketRouter(services, queuePairs, transport);
        this.regions = new Regions(nodeId, new PinnedPolicy(services), new PinOnMissPolicy(services, translations, router::laneStalled),
                new ShadowPolicy(services, translations), new OnDemandPolicy(services, translations, responderFaults));
        this.workRequests = new WorkRequests(nodeId, this.context.workRequestsPerNode(), kernel.context().callerShare());
        this.queuePairResources = new QueuePairResources(services, router, regions, responderFaults, () -> faultAnswer, this::armSweep,
                this::forget);
        this.endpointResources = new EndpointResources(services, regions, translations, workRequests, this::forget);
        this.faultAnswer = context.faultAnswer();
        this.firstCredits = partsPerPacket;
        this.credits = new CreditPool(kernel.systemBuffer().slotCount(), kernel.context().callerShare());
        this.sweepIntervalNs = Math.max(1_000_000, Math.min(context.ackTimeoutNs(), context.minAckTimeoutNs()) / 4);
    }

    /** Receives the service time of every page fault the NIC has served from now on (the metrics layer). */
    public void observeFaults(FaultObserver observer) {
        observers.observeFaults(observer);
    }

    /** Receives the length of every stall, parking, RNR back-off and credit wait from now on (the metrics layer). */
    public void observeWaits(WaitObserver observer) {
        observers.observeWaits(observer);
    }


    /** Receives the latency of every finished work request from now on (the metrics layer). */
    public void observeCompletions(CompletionObserver observer) {
        observers.observeCompletions(observer);
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
        Endpoint endpoint = new Endpoint(endpointResources, space, name == null ? "" : name);
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
        QueuePair qp = new QueuePair(queuePairResources, endpoint, cq, nextQpn.getAndIncrement(), srq,
                new Credits(services, credits, owner, firstCredits, context.creditsPerQp()), firstCredits, transport);
        queuePairs.put(qp);
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
        QueuePair fresh = new QueuePair(queuePairResources, endpoint, old.completionQueue(), old.qpn(), old.sharedReceiveQueue(),
                new Credits(services, credits, owner, firstCredits, context.creditsPerQp()), firstCredits, old.transport());
        fresh.protectionDomain(old.protectionDomain()); // the pair's PD is the object's, not its state's
        old.discard();
        queuePairs.put(fresh);
        endpoint.attach(fresh);
        return fresh;
    }

    public QueuePair queuePair(int qpn) {
        return queuePairs.get(qpn);
    }

    public List<QueuePair> queuePairs() {
        return queuePairs.all();
    }

    /** A memory region by the key peers use, or null. */
    public MemoryRegion regionByRkey(long rkey) {
        return regions.regionByRkey(rkey);
    }

    /** TLB entries holding a PIN_ON_MISS pin right now (never more than the entries). */
    public int tlbPinnedEntries() {
        return translations.tlb.pinnedEntries();
    }

    public int tlbEntries() {
        return translations.tlb.entries();
    }

    public int tlbValidEntries() {
        return translations.tlb.validEntries();
    }

    public int shadowEntries() {
        return translations.shadow.size();
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
        return translations.tlb;
    }

    /** Contexts the NIC's context cache holds now (0: none modelled). */
    public int contextCacheEntries() {
        return contexts.current().entries();
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
        contexts.replace(new ContextCache(entries, ways, missNs, counters));
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



    DmaEngine dma() {
        return dma;
    }

    NanoClock clock() {
        return clock;
    }

    NicTimers timers() {
        return timers;
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

    /** Drops TLB translations of a range (deregistration), releasing the pins PIN_ON_MISS entries held. */
    void dropTranslations(AddressSpace space, long firstVpn, long pages) {
        translations.dropTranslations(space, firstVpn, pages);
    }

    /** Work requests posted on this node and not yet completed (or, for receives, consumed). */
    public int workRequestsOutstanding() {
        return workRequests.outstanding();
    }

    void forget(Endpoint endpoint) {
        endpoints.remove(endpoint.id(), endpoint);
        translations.onDemand.invalidateAll(endpoint.id());
    }

    void forget(QueuePair qp) {
        queuePairs.remove(qp);
        router.forget(qp.linkWaiter);
    }

    /**
     * Attaches a UD pair to the multicast group {@code lid}, as {@code ibv_attach_mcast}: datagrams
     * any node sends to the group reach it from now on.
     *
     * @throws NicException for a pair that is not UD, a LID that is no group's, or a pair already attached
     */
    public void attachMulticast(QueuePair qp, int lid) {
        checkMulticast(qp, lid);
        if (!queuePairs.attach(qp, lid)) {
            throw new NicException("queue pair " + qp.qpn() + " is attached to multicast group " + lid + " already");
        }
    }

    /** Detaches a UD pair from the multicast group {@code lid}; a NicException when it is not attached. */
    public void detachMulticast(QueuePair qp, int lid) {
        checkMulticast(qp, lid);
        if (!queuePairs.detach(qp, lid)) {
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
        for (QueuePair qp : queuePairs.all()) {
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
        for (QueuePair qp : queuePairs.all()) {
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
