package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.FaultKind;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.NanoClock;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

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
    private final DmaEngine dma;
    private final CreditPool credits;
    /** Credits a queue pair is granted when created: what one MTU-sized packet may need; it borrows more as it uses them. */
    private final int firstCredits;
    private final Map<Integer, Endpoint> endpoints = new ConcurrentHashMap<>();
    private final Map<Integer, QueuePair> queuePairs = new ConcurrentHashMap<>();
    private final Map<Long, MemoryRegion> regionsByRkey = new ConcurrentHashMap<>();
    private final Map<String, Set<QueuePair>> waitingForLink = new ConcurrentHashMap<>();
    private final ResponderFaults responderFaults = new ResponderFaults(this);
    private final ReceiveFaultPolicy[] receivePolicies;
    private final AtomicInteger nextQpn = new AtomicInteger(1);
    private final AtomicInteger nextCqId = new AtomicInteger(1);
    private final SecureRandom keys = new SecureRandom();
    private final long sweepIntervalNs;
    private volatile PacketTransport transport;
    private volatile CompletionObserver completionObserver = (opcode, mode, status, bytes, latencyNs) -> { };
    private volatile FaultObserver faultObserver = (side, kind, mode, serviceNs) -> { };
    private volatile WaitObserver waitObserver = (cause, nanos) -> { };
    private volatile boolean closed;
    /** Carries batches between queue pairs of this node; made at the first such batch. */
    private java.util.concurrent.ExecutorService loopback;

    /**
     * @param transport how packets leave; may be set later with {@link #attach} when the transport needs the NIC first
     */
    public Nic(String nodeId, KernelAgent kernel, NicContext context, NicTimers timers, PacketTransport transport) {
        this.nodeId = nodeId;
        this.kernel = kernel;
        this.context = context.conclude();
        this.clock = context.clock();
        this.timers = guarded(timers);
        this.transport = transport;
        int pageSize = kernel.memory().pageSize();
        int slotBytes = kernel.systemBuffer().slotBytes();
        if (Math.min(context.mtuBytes(), pageSize) > slotBytes) {
            throw new IllegalArgumentException(NicConfiguration.MTU_PROP_NAME + " must be at most " + slotBytes + " with " + pageSize
                    + "-byte pages: a received part parks in one system-buffer slot, which is a page, and 64 KiB with larger pages; was "
                    + context.mtuBytes());
        }
        int partsPerPacket = (context.mtuBytes() + pageSize - 1) / pageSize + 1;
        if (context.creditsPerQp() < partsPerPacket) {
            throw new IllegalArgumentException(NicConfiguration.CREDITS_PER_QP_PROP_NAME + " must be at least " + partsPerPacket
                    + " (the page-sized parts one MTU-sized packet can touch), was " + context.creditsPerQp());
        }
        this.tlb = new Tlb(context.tlbEntries(), context.tlbWays(), context.tlbReplacement(), context.tlbIndexing(), context.randomSeed());
        Translator[] translators = new Translator[RegistrationMode.values().length];
        translators[RegistrationMode.PINNED.ordinal()] = new PinnedTranslator();
        translators[RegistrationMode.PIN_ON_MISS.ordinal()] = new PinOnMissTranslator(this);
        translators[RegistrationMode.SHADOW.ordinal()] = new ShadowTranslator(shadow);
        translators[RegistrationMode.ON_DEMAND.ordinal()] = new OnDemandTranslator(this);
        this.dma = new DmaEngine(kernel.memory(), translators);
        this.firstCredits = partsPerPacket;
        this.receivePolicies = ReceiveFaultPolicy.forEveryMode(this, new CreditPool(kernel.systemBuffer().slotCount()));
        this.credits = receivePolicy(RegistrationMode.SHADOW).credits();
        this.sweepIntervalNs = Math.max(1_000_000, context.ackTimeoutNs() / 4);
        this.timers.schedule(sweepIntervalNs, this::sweep);
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

    /** Nanoseconds the packets from each peer waited while PIN_ON_MISS pinned their pages, by peer. */
    private final Map<String, java.util.concurrent.atomic.LongAdder> receiveStallByPeer = new ConcurrentHashMap<>();

    /**
     * A receive stalled the lane it came on (U-Net/MM): charged to the peer whose batch this thread
     * is executing. A stall outside a batch's execution (none is known) counts in the NIC's total only.
     */
    void laneStalled(long nanos) {
        String peer = receivePass.get().executingFor;
        if (peer != null) {
            receiveStallByPeer.computeIfAbsent(peer, p -> new java.util.concurrent.atomic.LongAdder()).add(nanos);
        }
    }

    /** Nanoseconds packets from {@code peer} waited while PIN_ON_MISS pinned their destination pages. */
    public long receiveStallNanos(String peer) {
        java.util.concurrent.atomic.LongAdder stalled = receiveStallByPeer.get(peer);
        return stalled == null ? 0 : stalled.sum();
    }

    /** Receives the latency of every finished work request from now on (the metrics layer). */
    public void observeCompletions(CompletionObserver observer) {
        completionObserver = observer;
    }

    void observeCompletion(Completion.Opcode opcode, RegistrationMode mode, CompletionStatus status, long bytes, long latencyNs) {
        completionObserver.completed(opcode, mode, status, bytes, latencyNs);
    }

    /** Sets the transport packets leave through, when it could only be built after the NIC. */
    public void attach(PacketTransport value) {
        transport = value;
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

    // ---- resources ------------------------------------------------------------------------------

    /** Opens an endpoint: a fresh address space on the node, and the NIC's view of it. */
    public Endpoint openEndpoint(String name) {
        checkOpen();
        AddressSpace space = kernel.createAddressSpace();
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
        checkOpen();
        if (srq != null && (srq.endpoint() != endpoint || srq.isClosed())) {
            throw new NicException(srq + (srq.isClosed() ? " was destroyed" : " belongs to another endpoint than " + endpoint));
        }
        if (endpoint.isClosed()) {
            throw new NicException(endpoint + " is closed");
        }
        if (endpoint.queuePairCount() >= context.queuePairsPerSession()) {
            throw new QuotaExceededException(endpoint + " holds " + endpoint.queuePairCount() + " queue pairs, its limit ("
                    + NicConfiguration.QUEUE_PAIRS_PER_SESSION_PROP_NAME + "); destroy some first");
        }
        credits.reserve(firstCredits);
        QueuePair qp = new QueuePair(this, endpoint, cq, nextQpn.getAndIncrement(), srq, firstCredits);
        queuePairs.put(qp.qpn(), qp);
        endpoint.attach(qp);
        return qp;
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

    // ---- the wire -------------------------------------------------------------------------------

    /** A batch of packets from a peer. A bad packet is counted and dropped or refused; it never stops the batch. */
    public void receive(String peer, PacketBatch batch) {
        List<QueuePair> touched = new ArrayList<>(2);
        execute(peer, batch, touched, receivePass.get());
        for (QueuePair qp : touched) {
            qp.afterBatch();
        }
    }

    /**
     * As {@link #receive(String, PacketBatch)}, for a transport that reads many batches in one pass:
     * what the batches call for afterwards (acknowledgements, and the sends they allow) waits until
     * the pass ends, so that the batches of one pass are acknowledged together, as a NIC coalesces
     * acknowledgements (and an operating system its interrupts). The first batch of a pass on a
     * thread hands {@code passes} the task that does it.
     */
    public void receive(String peer, PacketBatch batch, ReceivePasses passes) {
        ReceivePass pass = receivePass.get();
        execute(peer, batch, pass.touched, pass);
        if (!pass.touched.isEmpty() && !pass.scheduled) {
            pass.scheduled = true;
            passes.atPassEnd(pass);
        }
    }

    /** How a transport that reads in passes runs a task once its current pass ends (on the same thread). */
    public interface ReceivePasses {
        void atPassEnd(Runnable task);
    }

    /**
     * The queue pairs that batches received on one thread touched in its current pass, and the peer
     * whose batch the thread is executing (what a lane's stall is charged to).
     */
    private static final class ReceivePass implements Runnable {
        final List<QueuePair> touched = new ArrayList<>(4);
        boolean scheduled;
        String executingFor;

        @Override
        public void run() {
            scheduled = false;
            try {
                for (int i = 0; i < touched.size(); i++) {
                    touched.get(i).afterBatch();
                }
            } finally {
                touched.clear();
            }
        }
    }

    private final ThreadLocal<ReceivePass> receivePass = ThreadLocal.withInitial(ReceivePass::new);

    /** Hands every packet of a batch to its queue pair, noting each queue pair touched. */
    private void execute(String peer, PacketBatch batch, List<QueuePair> touched, ReceivePass thread) {
        String outer = thread.executingFor;
        thread.executingFor = peer;
        try {
            executePackets(peer, batch, touched);
        } finally {
            thread.executingFor = outer;
        }
    }

    private void executePackets(String peer, PacketBatch batch, List<QueuePair> touched) {
        for (Packet packet : batch.getPacketsList()) {
            counters.increment(NicCounter.PACKETS_RECEIVED);
            counters.add(NicCounter.BYTES_RECEIVED, packet.getPayload().size());
            QueuePair qp = queuePairs.get(packet.getDstQpn());
            QpAddress connected = qp == null ? null : qp.peer();
            if (connected == null || !connected.node().equals(peer) || connected.qpn() != packet.getSrcQpn()) {
                counters.increment(NicCounter.DROPPED_PACKETS);
                continue;
            }
            try {
                qp.receive(packet);
            } catch (RuntimeException e) {
                counters.increment(NicCounter.DROPPED_PACKETS);
                LOG.log(System.Logger.Level.WARNING, "packet " + packet.getOpcode() + " psn " + packet.getPsn() + " for " + qp
                        + " from " + peer + " failed", e);
            }
            if (!touched.contains(qp)) {
                touched.add(qp);
            }
        }
    }

    /** The link to a peer can take data again: queue pairs that stopped for it carry on. */
    public void onPeerWritable(String peer) {
        Set<QueuePair> waiting = waitingForLink.get(peer);
        if (waiting == null) {
            return;
        }
        for (QueuePair qp : List.copyOf(waiting)) {
            waiting.remove(qp);
            qp.kick();
        }
    }

    /** A link to a peer was (re)established: queue pairs to it send again what is unacknowledged. */
    public void onPeerReconnected(String peer) {
        for (QueuePair qp : queuePairs.values()) {
            QpAddress p = qp.peer();
            if (p != null && p.node().equals(peer)) {
                qp.replay();
            }
        }
    }

    /** A peer restarted: the queue pairs connected to it fail, since the ones they were connected to are gone. */
    public void onPeerRestarted(String peer) {
        for (QueuePair qp : queuePairs.values()) {
            QpAddress p = qp.peer();
            if (p != null && p.node().equals(peer)) {
                qp.peerRestarted();
            }
        }
    }

    void transmit(String peer, int laneHint, PacketBatch batch) {
        for (Packet packet : batch.getPacketsList()) {
            counters.add(NicCounter.BYTES_SENT, packet.getPayload().size());
        }
        counters.add(NicCounter.PACKETS_SENT, batch.getPacketsCount());
        if (peer.equals(nodeId)) {
            loopback(batch);
            return;
        }
        PacketTransport t = transport;
        if (t != null) {
            t.send(peer, laneHint, batch);
        }
    }

    /**
     * A queue pair between two endpoints of this node: the batch comes back in on the NIC's loopback
     * thread, as it would from a link (never on the sender's thread, which holds its queue pair's
     * lock). Payloads are copied first, as a transport copies them into its buffers: they are views
     * of frames locked only until this returns.
     */
    private void loopback(PacketBatch batch) {
        PacketBatch.Builder copy = PacketBatch.newBuilder();
        for (Packet packet : batch.getPacketsList()) {
            copy.addPackets(packet.getPayload().isEmpty() ? packet
                    : packet.toBuilder().setPayload(com.google.protobuf.ByteString.copyFrom(packet.getPayload().asReadOnlyByteBuffer())).build());
        }
        PacketBatch delivered = copy.build();
        try {
            loopbackThread().execute(() -> receive(nodeId, delivered));
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // Closing: nothing is delivered any more.
        }
    }

    private synchronized java.util.concurrent.ExecutorService loopbackThread() {
        if (loopback == null) {
            loopback = java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "pagewire-nic-loopback-" + nodeId);
                t.setDaemon(true);
                return t;
            });
        }
        return loopback;
    }

    boolean isWritable(String peer, int laneHint) {
        if (peer.equals(nodeId)) {
            return true;
        }
        PacketTransport t = transport;
        return t != null && t.isWritable(peer, laneHint);
    }

    void waitForWritable(String peer, QueuePair qp) {
        if (waitingForLink.computeIfAbsent(peer, p -> ConcurrentHashMap.newKeySet()).add(qp)) {
            counters.increment(NicCounter.LINK_WAITS);
        }
        // The link may have turned writable between the check and the registration.
        if (isWritable(peer, qp.laneHint())) {
            timers.schedule(1_000, () -> onPeerWritable(peer));
        }
    }

    // ---- shared mechanics -------------------------------------------------------------------------

    Tlb tlb() {
        return tlb;
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

    /** What a receive into a page of this mode does when the page is not resident. */
    ReceiveFaultPolicy receivePolicy(RegistrationMode mode) {
        return receivePolicies[mode.ordinal()];
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
     * A fresh rkey: 62 random bits, and in the low two bits the region's registration mode (as a real
     * NIC's keys carry index bits), so a requester knows which writes may park in the system buffer
     * and must spend credits.
     */
    long newRkey(RegistrationMode mode) {
        while (true) {
            long rkey = (keys.nextLong() & ~RKEY_MODE_MASK) | mode.ordinal();
            if ((rkey & ~RKEY_MODE_MASK) != 0 && !regionsByRkey.containsKey(rkey)) {
                return rkey;
            }
        }
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

    void returnCredits(int n) {
        credits.release(n);
    }

    /**
     * Work requests outstanding on every endpoint of this node. Striped (a post and its completion run
     * on different threads): the limit is checked against the sum, so concurrent posters may pass it by
     * a few, which is all a bound on the node's heap needs.
     */
    private final java.util.concurrent.atomic.LongAdder workRequestsOutstanding = new java.util.concurrent.atomic.LongAdder();

    /** Counts one more outstanding work request against the node's limit, or refuses it. */
    void admitWorkRequest(long wrId) {
        int limit = context.workRequestsPerNode();
        if (workRequestsOutstanding.sum() >= limit) {
            throw new QuotaExceededException("work request " + wrId + ": node " + nodeId + " has " + limit
                    + " work requests outstanding, its limit (" + NicConfiguration.WORK_REQUESTS_PER_NODE_PROP_NAME + "); try again later");
        }
        workRequestsOutstanding.increment();
    }

    void retireWorkRequests(int n) {
        workRequestsOutstanding.add(-n);
    }

    /** Work requests posted on this node and not yet completed (or, for receives, consumed). */
    public int workRequestsOutstanding() {
        return (int) workRequestsOutstanding.sum();
    }

    /** Up to {@code wanted} more credits for a queue pair receiving data that spends them: as many as are free. */
    int lendCredits(int wanted) {
        return credits.lend(wanted);
    }

    void forget(Endpoint endpoint) {
        endpoints.remove(endpoint.id(), endpoint);
    }

    void forget(QueuePair qp) {
        queuePairs.remove(qp.qpn(), qp);
        for (Set<QueuePair> waiting : waitingForLink.values()) {
            waiting.remove(qp);
        }
    }

    /** The acknowledgement-timeout sweep over every queue pair; reschedules itself. */
    private void sweep() {
        if (closed) {
            return;
        }
        long now = clock.nanoTime();
        for (QueuePair qp : queuePairs.values()) {
            try {
                qp.checkTimeout(now);
            } catch (RuntimeException e) {
                LOG.log(System.Logger.Level.WARNING, "timeout check of " + qp + " failed", e);
            }
        }
        timers.schedule(sweepIntervalNs, this::sweep);
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
        for (Endpoint endpoint : endpoints.values()) {
            endpoint.close();
        }
        synchronized (this) {
            if (loopback != null) {
                loopback.shutdownNow();
            }
        }
        timers.close();
    }
}
