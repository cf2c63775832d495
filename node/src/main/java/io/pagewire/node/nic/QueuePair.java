package io.pagewire.node.nic;

import io.pagewire.proto.fabric.Opcode;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BiConsumer;

/**
 * A reliable connected queue pair, after InfiniBand RC: work requests posted here become packets to
 * one queue pair on a peer node, and requests from that queue pair are executed here. Completions go
 * to the queue pair's completion queue, in posting order.
 *
 * <p>Its two halves, {@link Requester} and {@link Responder}, share one lock. Every entry point (post,
 * packet arrival, timers, fault completions, link events) takes it, does its work, and sends what the
 * work produced before it lets go. A queue pair that fails (an error completion) moves to ERROR and
 * flushes everything still posted, as an RC queue pair does.
 */
public final class QueuePair implements AutoCloseable {
    /**
     * InfiniBand's connected transports: RC acknowledges, retries and reports every request's outcome;
     * UC sends WRITEs and SENDs once, completes them when they leave, and its responder drops (and
     * counts) a message that arrives incomplete, finds no receive, or cannot be placed. UD is UC's
     * connectionless sibling: one-packet SENDs, each addressed by its work request to any pair whose
     * Q_Key matches, taken by the receiving pair from any sender.
     */
    public enum Transport {
        RC, UC, UD
    }

    private final QueuePairResources resources;
    private final NicServices nic;
    private final Transport transport;
    private final Endpoint endpoint;
    private final CompletionQueue cq;
    private final int qpn;
    private final ReentrantLock lock = new ReentrantLock();
    private final Requester requester;
    private final Completer completer;
    private final Responder responder;
    private final Outbox outbox;
    private final ReceiveQueue receives;
    /** The shared receive queue its SENDs draw from, or null when it has its own. */
    private final SharedReceiveQueue srq;
    private final PairLifecycle life;
    private final PairCompletions completions;
    private volatile QpAddress peer;
    private volatile int qkey;
    /** The protection domain it belongs to (verbs' ibv_pd); 0 for none. */
    private volatile int protectionDomain;
    /** What its peer may do through it (the pair's access flags: REMOTE_WRITE, REMOTE_READ, REMOTE_ATOMIC); all by default. */
    private volatile Set<Access> remoteAccess = EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC);
    private boolean pumping;
    private boolean pumpAgain;
    private int parkedParts;
    /** Both ledgers of the pair's receive credits. */
    private final Credits credits;
    /** The grant the pair's address names. */
    private final int firstCredits;

    QueuePair(QueuePairResources resources, Endpoint endpoint, CompletionQueue cq, int qpn, SharedReceiveQueue srq, Credits credits,
            int firstCredits, Transport transport) {
        this.resources = resources;
        this.nic = resources.services();
        this.transport = transport;
        this.credits = credits;
        this.firstCredits = firstCredits;
        this.endpoint = endpoint;
        this.cq = cq;
        this.qpn = qpn;
        this.outbox = new Outbox(resources.wire(), nic.dma());
        this.srq = srq;
        this.receives = srq == null ? new ReceiveQueue(nic.context().cqCapacity()) : srq.queue();
        if (srq != null) {
            srq.attach(this);
        }
        this.life = new PairLifecycle(qpn, ConnectionAttributes.defaults(nic.context()));
        this.completions = new PairCompletions(nic.counters(), nic.observers(), nic.clock(), cq, qpn, this::overflowed);
        SendQueue sendQueue = new SendQueue();
        Recovery recovery = new Recovery(nic, resources.armSweep());
        LocalFaults localFaults = new LocalFaults(this::onLocalFaultResolved);
        this.completer = new Completer(this, sendQueue, recovery, localFaults);
        this.requester = new Requester(this, sendQueue, recovery, localFaults, completer);
        this.responder = new Responder(this);
    }

    /** This pair as it waits for a lane that takes data. */
    final Wire.LinkWaiter linkWaiter = new Wire.LinkWaiter() {
        @Override
        public int laneHint() {
            return QueuePair.this.laneHint();
        }

        @Override
        public void kick() {
            QueuePair.this.kick();
        }
    };

    /** Which lane the fabric carries this queue pair on: the same number on both ends once connected. */
    int laneHint() {
        return outbox.laneHint();
    }

    public int qpn() {
        return qpn;
    }

    public Transport transport() {
        return transport;
    }

    /** Whether nothing is acknowledged or sent again (UC, UD). */
    boolean unreliable() {
        return transport != Transport.RC;
    }

    /** Whether each request names its own destination and any sender's datagrams are taken (UD). */
    boolean datagram() {
        return transport == Transport.UD;
    }

    /** A UD pair's Q_Key: datagrams that carry another are dropped. */
    public int qkey() {
        return qkey;
    }

    /** Sets a UD pair's Q_Key (ibv_modify_qp's IBV_QP_QKEY), in any state. */
    public void qkey(int value) {
        qkey = value;
    }

    public Endpoint endpoint() {
        return endpoint;
    }

    /** The protection domain it belongs to; 0 for none. */
    public int protectionDomain() {
        return protectionDomain;
    }

    /** Puts it in a protection domain (when it is created, before anything is posted). */
    public void protectionDomain(int domain) {
        this.protectionDomain = domain;
    }

    /** Sets what its peer may do through it (ibv_modify_qp's qp_access_flags); rights other than remote ones are ignored. */
    public void remoteAccess(Set<Access> rights) {
        EnumSet<Access> remote = EnumSet.noneOf(Access.class);
        for (Access right : rights) {
            if (right == Access.REMOTE_WRITE || right == Access.REMOTE_READ || right == Access.REMOTE_ATOMIC) {
                remote.add(right);
            }
        }
        this.remoteAccess = remote;
    }

    /** Whether its peer may do {@code right} through it. */
    boolean allowsRemote(Access right) {
        return remoteAccess.contains(right);
    }

    public QueuePairState state() {
        return life.state();
    }

    /** The peer this queue pair is connected to, or null. */
    public QpAddress peer() {
        return peer;
    }

    /** What a peer needs to connect to this queue pair. */
    public QpAddress address() {
        return new QpAddress(nic.nodeId(), qpn, firstCredits, nic.dma().pageSize());
    }

    /** Connects to a queue pair on a peer node (the RTR and RTS transitions in one), with the node's timers. */
    public void connect(QpAddress remote) {
        connect(remote, ConnectionAttributes.defaults(nic.context()));
    }

    /** Connects to a queue pair on a peer node with its owner's sequence numbers and timers (RTR, then RTS). */
    public void connect(QpAddress remote, ConnectionAttributes attributes) {
        lock.lock();
        try {
            toReadyToReceive(remote, attributes);
            toReady(attributes);
        } finally {
            unlockAndSend();
        }
    }

    /**
     * RTR, after {@code ibv_modify_qp}: the pair executes and answers its peer's requests from here on,
     * and sends nothing of its own until {@link #readyToSend}.
     *
     * @throws NicException unless the pair is in INIT, or when the peer's address is not one a node gives
     */
    public void readyToReceive(QpAddress remote, ConnectionAttributes attributes) {
        lock.lock();
        try {
            toReadyToReceive(remote, attributes);
        } finally {
            unlockAndSend();
        }
    }

    /**
     * RTS, after {@code ibv_modify_qp}: from RTR the pair starts sending at the attributes' send PSN;
     * from RTS or SQD only its timers change (and a drain ends).
     *
     * @throws NicException from any other state
     */
    public void readyToSend(ConnectionAttributes attributes) {
        lock.lock();
        try {
            life.checkMayBecomeReady();
            toReady(attributes);
            pump();
        } finally {
            unlockAndSend();
        }
    }

    /**
     * SQD, after {@code ibv_modify_qp}: requests already started finish, later ones wait for RTS;
     * {@link QueuePairEvent#SEND_QUEUE_DRAINED} tells when the started ones are done.
     *
     * @throws NicException unless the pair is ready to send
     */
    public void drainSendQueue() {
        lock.lock();
        try {
            if (life.drain()) {
                requester.drain();
                life.checkDrained(requester.drained());
            }
        } finally {
            unlockAndSend();
        }
    }

    /**
     * ERROR by its owner's choice, after {@code ibv_modify_qp}: every request and receive still posted
     * completes as flushed, in posting order, and later ones complete as flushed too.
     */
    public void moveToError() {
        lock.lock();
        try {
            if (life.state() == QueuePairState.CLOSED) {
                throw new NicException("queue pair " + qpn + " is closed");
            }
            if (life.state() != QueuePairState.ERROR) {
                acknowledgeBeforeStopping();
                String why = "queue pair " + qpn + " was moved to ERROR by its owner";
                enterError(null, CompletionStatus.FLUSHED, why, "flushed: " + why, false);
            }
        } finally {
            unlockAndSend();
        }
    }

    /** The connection's sequence numbers and timers as its owner last set them. */
    public ConnectionAttributes attributes() {
        lock.lock();
        try {
            return life.attributes();
        } finally {
            lock.unlock();
        }
    }

    private void toReadyToReceive(QpAddress remote, ConnectionAttributes attributes) {
        life.checkMayConnect();
        if (datagram()) {
            // UD has no peer: each request names its destination, and any sender's datagrams are taken.
            outbox.peer(null, qpn);
            requester.connect(address());
            responder.configure(attributes, true);
            life.readyToReceive(attributes);
            return;
        }
        if (remote == null) {
            throw new NicException("queue pair " + qpn + " is " + transport + ": it connects to a peer's address");
        }
        int needed = Credits.perPacket(nic.context().mtuBytes(), Integer.numberOfTrailingZeros(remote.pageSize()));
        if (remote.initialCredits() < needed || remote.initialCredits() > Credits.MAX_INITIAL) {
            throw new NicException("queue pair " + qpn + " cannot connect: the peer's address grants " + remote.initialCredits()
                    + " credits, where one MTU-sized packet may need " + needed + " and a node grants at most " + Credits.MAX_INITIAL
                    + "; give the address CreateQueuePair returned on the peer");
        }
        peer = remote;
        // Both ends of the pair name the same lane (a function of the two numbers that does not care
        // which end computes it), so the fabric can keep a queue pair's packets and their
        // acknowledgements on one connection; pairs with equal numbers at both ends still spread.
        outbox.peer(remote.node(), 16 * Math.min(qpn, remote.qpn()) + Math.max(qpn, remote.qpn()));
        credits.connect(remote.initialCredits());
        requester.connect(remote);
        responder.configure(attributes, true);
        life.readyToReceive(attributes);
    }

    private void toReady(ConnectionAttributes attributes) {
        requester.configure(attributes, life.firstReady());
        responder.configure(attributes, false);
        if (life.state() == QueuePairState.DRAINING) {
            requester.resume();
        }
        life.ready(attributes);
    }

    /** Whether the pair executes its peer's requests: connected, and not failed. */
    boolean receiving() {
        return life.receiving();
    }

    /** Whether the pair sends: RTS, or draining what it started. */
    boolean sending() {
        return life.sending();
    }

    /**
     * Paces what this queue pair sends, as ibverbs' {@code ibv_modify_qp_rate_limit} does: at most
     * {@code bytesPerSecond} (payload, requested READ bytes and 64 bytes of headers per packet), with
     * {@code burstBytes} back to back after a pause (0: the node's per-session burst). A rate of 0
     * removes the pair's own limit. The session's allowance, where the node sets one, applies as well:
     * a packet waits for whichever of the two is later.
     *
     * @throws NicException for a negative rate or a burst outside 0 to 1 GiB
     */
    public void rateLimit(long bytesPerSecond, long burstBytes) {
        if (bytesPerSecond < 0 || burstBytes < 0 || burstBytes > MAX_RATE_LIMIT_BURST_BYTES) {
            throw new NicException("queue pair " + qpn + ": a rate limit is 0 (none) or a positive number of bytes per second, with a burst of 0"
                    + " (the node's) to " + MAX_RATE_LIMIT_BURST_BYTES + " bytes; was " + Long.toUnsignedString(bytesPerSecond) + " B/s and "
                    + Long.toUnsignedString(burstBytes) + " B");
        }
        lock.lock();
        try {
            requester.rateLimit(bytesPerSecond == 0 ? null : new SendAllowance(bytesPerSecond,
                    burstBytes == 0 ? nic.context().sendBurstBytesPerSession() : burstBytes, nic.clock().nanoTime()));
            pump();
        } finally {
            unlockAndSend();
        }
    }

    /** The largest burst a queue pair's own rate limit may allow. */
    static final long MAX_RATE_LIMIT_BURST_BYTES = 1L << 30;

    /**
     * Posts a work request. Errors in the request itself (unknown lkey, range outside the region,
     * length) are thrown at once; everything that happens later is reported as a completion.
     */
    public void post(WorkRequest request) {
        post(List.of(request));
    }

    /** Posts several work requests at once; they go out in one batch where they fit. */
    public void post(List<WorkRequest> requests) {
        lock.lock();
        try {
            life.checkMayPost();
            for (WorkRequest request : requests) {
                if (sending()) {
                    checkSendQueueRoom(request);
                    requester.post(request);
                } else {
                    completions.complete(request, CompletionStatus.FLUSHED, life.flushedBecause(), 0);
                }
            }
            pump();
        } finally {
            unlockAndSend();
        }
    }

    /**
     * Posts several work requests, reporting each one the queue pair refuses instead of stopping at
     * it; the accepted ones go out together.
     */
    public void postEach(List<WorkRequest> requests, BiConsumer<WorkRequest, NicException> refused) {
        lock.lock();
        try {
            life.checkMayPost();
            for (WorkRequest request : requests) {
                if (!sending()) {
                    completions.complete(request, CompletionStatus.FLUSHED, life.flushedBecause(), 0);
                    continue;
                }
                try {
                    checkSendQueueRoom(request);
                    requester.post(request);
                } catch (NicException e) {
                    refused.accept(request, e);
                }
            }
            pump();
        } finally {
            unlockAndSend();
        }
    }

    /**
     * Posts a receive buffer for the next SEND (or WRITE_WITH_IMM) from the peer, as
     * {@code ibv_post_recv}; it may be posted before the queue pair connects. A bad buffer is thrown
     * at once; on a failed queue pair the receive completes as flushed.
     */
    public void postReceive(ReceiveRequest request) {
        postReceives(List.of(request));
    }

    /** Posts several receives, in order. */
    public void postReceives(List<ReceiveRequest> requests) {
        if (srq != null) {
            throw new NicException("queue pair " + qpn + " takes its receives from " + srq + ": post them there");
        }
        lock.lock();
        try {
            for (ReceiveRequest request : requests) {
                if (life.takesReceives()) {
                    receives.post(endpoint, request);
                } else {
                    completions.completeReceive(request, Completion.Opcode.RECV, CompletionStatus.FLUSHED, 0, life.flushedBecause(), false, 0,
                            false);
                }
            }
        } finally {
            unlockAndSend();
        }
    }

    /** The send queue holds at most as many outstanding requests as a completion queue holds completions (lock held). */
    private void checkSendQueueRoom(WorkRequest request) {
        int capacity = nic.context().cqCapacity();
        if (requester.outstanding() >= capacity) {
            throw new QuotaExceededException("work request " + request.wrId() + ": queue pair " + qpn + " has " + capacity
                    + " requests outstanding already, its send queue's size (pagewire.nic.cqCapacity); reap completions first");
        }
    }

    /** Receives posted and not yet consumed by a message. */
    public int postedReceives() {
        lock.lock();
        try {
            return receives.size();
        } finally {
            lock.unlock();
        }
    }

    /** Requests posted and not yet completed. */
    public int outstanding() {
        lock.lock();
        try {
            return requester.outstanding();
        } finally {
            lock.unlock();
        }
    }

    /** Parts of received writes still parked in the system buffer. */
    public int parkedParts() {
        lock.lock();
        try {
            return parkedParts;
        } finally {
            lock.unlock();
        }
    }

    /** Closes the queue pair: what is still posted completes as flushed; its credits go back once parked data is placed. */
    @Override
    public void close() {
        lock.lock();
        try {
            acknowledgeBeforeStopping();
            if (!life.close()) {
                return;
            }
            completer.failAll(null, CompletionStatus.FLUSHED, null, "queue pair " + qpn + " was closed");
            flushReceives("queue pair " + qpn + " was closed");
            if (srq != null) {
                srq.detach(this);
            }
            returnCreditsIfDone();
        } finally {
            unlockAndSend();
        }
        resources.closed().accept(this);
        endpoint.detach(this);
    }

    /**
     * Ends this pair for a reset: like {@link #close} but what is still posted is dropped without
     * completions, as RESET drops it; the NIC puts a fresh pair under the same number.
     */
    void discard() {
        lock.lock();
        try {
            acknowledgeBeforeStopping();
            if (!life.close()) {
                return;
            }
            completer.discardAll();
            responder.discardMessage();
            if (srq == null) {
                receives.drain();
            } else {
                srq.detach(this);
            }
            returnCreditsIfDone();
        } finally {
            unlockAndSend();
        }
        resources.closed().accept(this);
        endpoint.detach(this);
    }

    /** The completion queue and shared receive queue a reset pair keeps. */
    CompletionQueue completionQueue() {
        return cq;
    }

    SharedReceiveQueue sharedReceiveQueue() {
        return srq;
    }

    // ---- entry points from the NIC (each takes the lock) -------------------------------------------

    /** One datagram for this UD pair from {@code sender}; the caller calls {@link #afterBatch} when its batch is done. */
    void receiveDatagram(String sender, Packet packet) {
        lock.lock();
        try {
            if (!receiving()) {
                nic.counters().increment(NicCounter.DROPPED_PACKETS);
                return;
            }
            responder.onDatagram(sender, packet, outbox);
        } finally {
            lock.unlock();
        }
    }

    /** One packet for this queue pair; the caller calls {@link #afterBatch} when its batch is done. */
    void receive(Packet packet) {
        lock.lock();
        try {
            if (!receiving()) {
                nic.counters().increment(NicCounter.DROPPED_PACKETS);
                return;
            }
            switch (packet.getOpcode()) {
                case ACKNOWLEDGE -> completer.onAcknowledge(packet);
                case READ_RESPONSE -> completer.onReadResponse(packet, outbox);
                case ATOMIC_ACKNOWLEDGE -> completer.onAtomicAcknowledge(packet, outbox);
                default -> {
                    life.requestArrived();
                    responder.onRequest(packet, outbox);
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /**
     * A NIC acknowledges what it executed as it receives it, before its owner can see the completion;
     * here the acknowledgement of a batch goes out after it, so a pair its owner stops in between
     * (destroy, reset, ERROR the moment a receive completes) acknowledges first (lock held).
     */
    private void acknowledgeBeforeStopping() {
        if (receiving()) {
            responder.flushAcknowledgement(outbox);
        }
    }

    /** After a batch of packets: acknowledge what was executed, then send what the answers allow. */
    void afterBatch() {
        lock.lock();
        try {
            if (receiving()) {
                responder.flushAcknowledgement(outbox);
                pump();
            }
        } finally {
            unlockAndSend();
        }
    }

    void onRnrTimerExpired() {
        lock.lock();
        try {
            completer.rnrTimerExpired();
            pump();
        } finally {
            unlockAndSend();
        }
    }

    /** The session's send allowance has room again for the packets this pair was holding. */
    void onPacingTimerExpired() {
        lock.lock();
        try {
            requester.pacingTimerExpired();
            pump();
        } finally {
            unlockAndSend();
        }
    }

    void onLocalFaultResolved(SendWqe wqe, long vpn, Throwable error) {
        lock.lock();
        try {
            completer.faultResolved(wqe, vpn, error, outbox);
            pump();
        } finally {
            unlockAndSend();
        }
    }

    void onParkedPartDone(long psn, Throwable failure) {
        lock.lock();
        try {
            parkedParts--;
            if (receiving()) {
                responder.parkedPartDone(psn, failure, outbox);
                responder.flushAcknowledgement(outbox);
            }
            returnCreditsIfDone();
        } finally {
            unlockAndSend();
        }
    }

    /** Parts of this queue pair's received writes still parked (lock held). */
    int parkedPartsHeld() {
        return parkedParts;
    }

    void parkStarted() {
        parkedParts++;
    }

    void parkAbandoned() {
        parkedParts--;
    }

    /** Sends again whatever the link lost. */
    void replay() {
        lock.lock();
        try {
            if (receiving()) {
                completer.replay();
                responder.flushAcknowledgement(outbox);
                pump();
            }
        } finally {
            unlockAndSend();
        }
    }

    /** The peer node restarted: everything outstanding fails, and the pair moves to ERROR. */
    void peerRestarted() {
        lock.lock();
        try {
            if (receiving()) {
                QpAddress p = peer;
                String error = "node " + p.node() + " restarted: its queue pair " + p.qpn() + " no longer exists";
                enterError(completer.oldest(), CompletionStatus.REMOTE_OPERATIONAL_ERROR, error, "flushed: " + error, true);
            }
        } finally {
            unlockAndSend();
        }
    }

    void kick() {
        lock.lock();
        try {
            pump();
        } finally {
            unlockAndSend();
        }
    }

    /** Whether the timeout sweep has work here (read without the lock). */
    boolean sweepWanted() {
        return requester.sweepWanted();
    }

    void checkTimeout(long now) {
        if (!requester.sweepWanted()) {
            return; // nothing queued since the sweep last found this pair idle: its lock stays with the data path
        }
        lock.lock();
        try {
            if (sending() && completer.checkTimeout(now)) {
                pump();
            }
        } finally {
            unlockAndSend();
        }
    }

    // ---- shared by the two halves (lock held) -------------------------------------------------------

    /** What the pair's halves use beyond its own state: the NIC's services, the wire, the regions peers' keys name, ... */
    QueuePairResources resources() {
        return resources;
    }

    /** The next packet of {@code out}'s batch, addressed from this pair to its peer: fill it before anything flushes {@code out}. */
    Packet packet(Outbox out, Opcode opcode, long psn) {
        nic.contexts().read(ContextCache.Kind.QUEUE_PAIR, qpn); // every packet the pair sends reads its context
        QpAddress p = peer;
        return out.next().setDstQpn(p == null ? 0 : p.qpn()).setSrcQpn(qpn).setPsn(psn).setOpcode(opcode);
    }

    /** Where the pair's requests and receives complete. */
    PairCompletions completions() {
        return completions;
    }

    /** The completion queue overflowed: the pair fails, unless it already stopped receiving. */
    private void overflowed(String error) {
        if (receiving()) {
            fail(null, CompletionStatus.FLUSHED, error);
        }
    }

    /** Completes a request that ran on this node (a window's bind or invalidation), in its place in the send queue. */
    void completeLocal(WorkRequest wr, CompletionStatus status, String error) {
        completions.complete(wr, status, error, 0);
    }

    /** A request that ran on this node failed: it completes with {@code status}, the rest are flushed, the pair moves to ERROR. */
    void failLocal(WorkRequest wr, CompletionStatus status, String error) {
        if (sending()) {
            completions.complete(wr, status, error, 0);
            enterError(null, CompletionStatus.FLUSHED, error, "flushed: queue pair " + qpn + " failed: " + error, true);
        } else {
            completions.complete(wr, CompletionStatus.FLUSHED, "queue pair " + qpn + " is " + life.state(), 0);
        }
    }

    /** Fails one request with a status, flushes the rest, and moves to ERROR. */
    void fail(SendWqe wqe, CompletionStatus status, String error) {
        if (receiving()) {
            enterError(wqe, status, error, "flushed: queue pair " + qpn + " failed: " + error, true);
        }
    }

    /**
     * Moves to ERROR: {@code failed} completes with {@code status}, everything else posted as flushed, in
     * order. The NIC's own move ({@code fatal}) raises QP_FATAL; a pair on a shared receive queue takes
     * no more from it, which LAST_WQE_REACHED says.
     */
    private void enterError(SendWqe failed, CompletionStatus status, String error, String flushReason, boolean fatal) {
        life.fail(error, fatal, srq != null);
        completer.failAll(failed, status, error, flushReason);
        flushReceives(flushReason);
        returnCreditsIfDone();
    }

    ReceiveQueue receives() {
        return receives;
    }

    /** Completes as flushed the receive a message was landing in, and those posted to its own queue (a shared one keeps its own). */
    private void flushReceives(String reason) {
        responder.abandonMessage(reason);
        if (srq != null) {
            return;
        }
        for (ReceiveQueue.Posted posted = receives.take(); posted != null; posted = receives.take()) {
            completions.completeReceive(posted.request(), Completion.Opcode.RECV, CompletionStatus.FLUSHED, 0, reason, false, 0, false);
        }
    }

    private void pump() {
        if (!sending()) {
            return;
        }
        if (pumping) {
            pumpAgain = true;
            return;
        }
        pumping = true;
        try {
            do {
                pumpAgain = false;
                requester.pump(outbox);
            } while (pumpAgain);
        } finally {
            pumping = false;
        }
    }

    private void unlockAndSend() {
        List<QueuePairEvent> events = null;
        try {
            if (lock.getHoldCount() == 1) {
                if (life.state() == QueuePairState.DRAINING) {
                    life.checkDrained(requester.drained());
                }
                outbox.flush();
                cq.flush();
                events = life.takeEvents();
            }
        } finally {
            lock.unlock();
        }
        if (events != null) {
            for (QueuePairEvent event : events) {
                endpoint.raised(qpn, event);
            }
        }
    }

    /**
     * Gives the pair's share of the system buffer back once it can receive no more (closed, or failed:
     * a pair in ERROR executes nothing until it is destroyed, so a failed pair does not keep other
     * pairs from being created) and nothing it parked is still waiting for its page.
     */
    private void returnCreditsIfDone() {
        if (life.ended() && parkedParts == 0) {
            credits.returnToPool();
        }
    }

    /** The pair's receive credits (lock held). */
    Credits credits() {
        return credits;
    }

    /** The queue pair's sequence numbers, credits and waits: what a failing test prints. */
    public String describe() {
        lock.lock();
        try {
            return this + ": " + requester.describe() + "; " + responder.describe() + " parked parts=" + parkedParts + "; "
                    + credits.describe();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public String toString() {
        QpAddress p = peer;
        return "queue pair " + qpn + " of " + endpoint + (p == null ? "" : " to " + p.node() + "/" + p.qpn()) + " (" + life.state() + ")";
    }
}
