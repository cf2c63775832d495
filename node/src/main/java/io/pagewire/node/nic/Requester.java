package io.pagewire.node.nic;

import io.pagewire.kernel.BadAddressException;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.PageFault;
import io.pagewire.proto.fabric.Opcode;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.CompletionException;
import org.agrona.collections.LongHashSet;

/**
 * The sending half of a queue pair (the requester of InfiniBand RC): it validates and numbers posted
 * requests, segments messages at the MTU, keeps at most a window of PSNs outstanding, and completes
 * requests as acknowledgements and responses arrive. What it may send is its {@link Credits}' and its
 * {@link Pacing}'s to say; when it must go back to the first unacknowledged PSN (a sequence NAK, an RNR
 * NAK's delay, the acknowledgement timer) is its {@link Recovery}'s. Guarded by the queue pair's lock.
 */
final class Requester {
    private final QueuePair qp;
    private final NicServices nic;
    private final Wire wire;
    private final Regions regions;
    private final NicContext ctx;
    private final NicCounters counters;
    private final DmaEngine dma;
    private final int mtu;
    private final int sendWindow;
    private final int batchPackets;
    /** Where the last {@link #gatherOrFail} put its payload: an array of the outbox's, and the payload's start in it. */
    private byte[] gathered;
    private int gatheredStart;
    private final WqeRing wqes = new WqeRing();
    private final Recovery recovery;
    private final Pacing pacing;
    private final long[] notResident = new long[1];

    /** The PSN the next posted request starts at. */
    private long nextPsn;
    /** The next PSN to transmit; moved back to retransmit. */
    private long sendPsn;
    /** Every PSN up to this one is acknowledged. */
    private long ackedThrough = -1;
    private long highestSent = -1;
    /** No packet at or after this PSN goes out: where a send queue drain (SQD) stops; unbounded otherwise. */
    private long sendLimit = Long.MAX_VALUE;
    /** Why packets at or below highestSent are being sent again: the last thing that moved sendPsn back. */
    private NicCounter resendCause = NicCounter.RETRANSMITTED_AFTER_ACK_TIMEOUT;
    /** Credits were spent for every PSN up to this one (retransmissions spend none). */
    private long chargedThrough = -1;
    private final Credits credits;
    private int remotePageShift;
    /**
     * Local pages with a fault raised and not yet served. The queue pair sends nothing until every one
     * is in; a page faults once however many responses land on it meanwhile.
     */
    private final LongHashSet faultsPending = new LongHashSet();
    /** READs with responses dropped for a local fault, asked for again (only those) once the faults are served. */
    private final ArrayList<SendWqe> refetching = new ArrayList<>(2);

    Requester(QueuePair qp) {
        this.qp = qp;
        QueuePairResources resources = qp.resources();
        this.nic = resources.services();
        this.wire = resources.wire();
        this.regions = resources.regions();
        this.ctx = nic.context();
        this.counters = nic.counters();
        this.dma = nic.dma();
        this.mtu = ctx.mtuBytes();
        this.sendWindow = ctx.sendWindowPackets();
        this.batchPackets = ctx.batchPackets();
        this.credits = qp.credits();
        this.recovery = new Recovery(nic, resources.armSweep());
        this.pacing = new Pacing(nic, qp.endpoint().sendAllowance(), qp::onPacingTimerExpired);
    }

    void connect(QpAddress remote) {
        remotePageShift = Integer.numberOfTrailingZeros(remote.pageSize());
    }

    /**
     * Takes the owner's attributes on the way to RTS: its timers, and (before anything was posted) the
     * first PSN, so that packets of an earlier connection of the same pair fall outside the window.
     */
    void configure(ConnectionAttributes attributes, boolean firstTime) {
        recovery.configure(attributes);
        if (firstTime && wqes.isEmpty()) {
            nextPsn = attributes.sendPsn();
            sendPsn = nextPsn;
            ackedThrough = nextPsn - 1;
            highestSent = nextPsn - 1;
            chargedThrough = nextPsn - 1;
        }
    }

    /**
     * Starts draining the send queue (SQD): requests with a packet out already finish, the rest wait
     * until {@link #resume}.
     */
    void drain() {
        long started = Math.max(sendPsn - 1, highestSent);
        int index = started < unackedPsn() ? -1 : wqes.indexOf(started);
        sendLimit = index < 0 ? Math.max(started + 1, unackedPsn()) : wqes.get(index).psnLast() + 1;
    }

    /** Whether every request started before the drain began is finished. */
    boolean drained() {
        return unackedPsn() >= sendLimit;
    }

    /** Back to RTS: what waited during the drain may go. */
    void resume() {
        sendLimit = Long.MAX_VALUE;
    }

    /** Validates a work request against the endpoint's regions and queues it; local errors are thrown at once. */
    void post(WorkRequest wr) {
        if (wr.isLocal()) {
            runLocally(wr);
            return;
        }
        int packets = 1;
        if (qp.datagram() && (wr.datagram() == null || (wr.opcode() != Completion.Opcode.SEND && wr.opcode() != Completion.Opcode.SEND_WITH_IMM))) {
            throw new NicException("work request " + wr.wrId() + ": " + (wr.datagram() == null ? "a UD SEND names its destination (an address"
                    + " handle, remote QPN and Q_Key)" : wr.opcode() + " needs a connected queue pair; UD carries SENDs"));
        }
        if (qp.unreliable() && (wr.isAtomic() || wr.opcode() == Completion.Opcode.READ)) {
            throw new NicException("work request " + wr.wrId() + ": " + wr.opcode() + " needs a reliable queue pair; UC carries WRITEs and SENDs");
        }
        if (wr.isAtomic()) {
            if (wr.rkey() != 0 && (wr.remoteAddress() & 7) != 0) {
                throw new NicException(String.format("work request %d: %s needs an 8-byte aligned remote address, was 0x%x", wr.wrId(),
                        wr.opcode(), wr.remoteAddress()));
            }
            if (wr.opcode() == Completion.Opcode.COMPARE_SWAP && wr.rkey() == 0) {
                throw new NicException("work request " + wr.wrId() + ": COMPARE_SWAP works on registered memory: give the word's rkey");
            }
            if (!wr.segments().isEmpty() && wr.length() != Long.BYTES) {
                throw new NicException("work request " + wr.wrId() + ": " + wr.opcode() + " fetches an 8-byte word; its local buffer is "
                        + wr.length() + " bytes");
            }
        } else {
            if (wr.length() < 0 || wr.length() > ctx.maxMessageBytes()) {
                throw new NicException("work request " + wr.wrId() + ": length must be 0 to " + ctx.maxMessageBytes() + ", was " + wr.length());
            }
            packets = qp.datagram() ? 1 : Math.max(1, (int) ((wr.length() + (long) mtu - 1) / mtu));
        }
        boolean landsHere = wr.opcode() == Completion.Opcode.READ || wr.isAtomic();
        MemoryRegion[] regions = localRegions(wr, landsHere);
        qp.endpoint().admitWorkRequest(wr.wrId());
        SendWqe wqe = new SendWqe(wr, regions, nextPsn, packets, nic.clock().nanoTime());
        wqes.add(wqe);
        nextPsn += packets;
        recovery.workQueued();
        String foreign = protectionMismatch(regions);
        if (foreign != null) {
            // Posted, then failed where it stands, as an HCA fails a request whose lkey is of another PD.
            qp.fail(wqe, CompletionStatus.LOCAL_PROTECTION_ERROR, "work request " + wr.wrId() + ": " + foreign);
        }
    }

    /** Why the pair may not use one of these regions (another protection domain), or null. */
    private String protectionMismatch(MemoryRegion[] regions) {
        for (MemoryRegion region : regions) {
            String why = region == null ? null : region.protectionMismatch(qp.protectionDomain());
            if (why != null) {
                return why;
            }
        }
        return null;
    }

    /**
     * The region of each of a request's elements (null for a zero-length one, which names no memory),
     * checked: registered here, usable, covering the element, and locally writable where data lands.
     */
    private MemoryRegion[] localRegions(WorkRequest wr, boolean landsHere) {
        List<Segment> segments = wr.segments();
        if (segments.size() > MAX_SEGMENTS) {
            throw new NicException("work request " + wr.wrId() + ": " + segments.size() + " scatter/gather elements; a request takes at most "
                    + MAX_SEGMENTS);
        }
        MemoryRegion[] regions = new MemoryRegion[segments.size()];
        for (int i = 0; i < regions.length; i++) {
            Segment e = segments.get(i);
            if (e.length() < 0) {
                throw new NicException("work request " + wr.wrId() + ": a scatter/gather element's length must not be negative, was "
                        + e.length());
            }
            if (e.length() == 0) {
                continue;
            }
            MemoryRegion local = qp.endpoint().region(e.lkey());
            if (local != null) {
                nic.contexts().read(ContextCache.Kind.REGION, local.rkey());
            }
            if (local == null) {
                throw new NicException("work request " + wr.wrId() + ": lkey " + e.lkey() + " is not registered on " + qp.endpoint());
            }
            if (local.invalidReason() != null) {
                throw new NicException("work request " + wr.wrId() + ": " + local + " is no longer usable: " + local.invalidReason());
            }
            if (!local.covers(e.address(), e.length())) {
                throw new NicException(String.format("work request %d: local range 0x%x+%d is outside %s", wr.wrId(), e.address(), e.length(),
                        local));
            }
            if (landsHere && !local.allows(Access.LOCAL_WRITE)) {
                throw new NicException("work request " + wr.wrId() + ": " + wr.opcode() + " lands in " + local + ", which lacks LOCAL_WRITE");
            }
            regions[i] = local;
        }
        return regions;
    }

    /** The most scatter/gather elements one request or receive may have (what the device reports as max_sge). */
    static final int MAX_SEGMENTS = 32;

    /**
     * Runs a window's bind or invalidation now, on this node (no packet goes out), and reports it in its
     * place in the send queue: at once when nothing is outstanding, else right after the request now last.
     * A failure completes it with an error in that place, which moves the pair to ERROR as any does.
     */
    private void runLocally(WorkRequest wr) {
        CompletionStatus status = CompletionStatus.SUCCESS;
        String error = null;
        try {
            Endpoint endpoint = qp.endpoint();
            MemoryWindow window = endpoint.window(wr.rkey());
            if (window == null) {
                throw new NicException(String.format("rkey 0x%x names no memory window of %s", wr.rkey(), endpoint));
            }
            if (wr.opcode() == Completion.Opcode.BIND_WINDOW) {
                status = CompletionStatus.MEMORY_WINDOW_BIND_ERROR;
                window.bind(wr.add() == 0 ? null : endpoint.region(wr.counterId()), wr.remoteAddress(), wr.add(), accessOf((int) wr.swap()),
                        wr.rkey(), qp.qpn());
            } else {
                status = CompletionStatus.LOCAL_PROTECTION_ERROR;
                window.invalidate(wr.rkey());
            }
            status = CompletionStatus.SUCCESS;
        } catch (NicException e) {
            error = e.getMessage();
        }
        SendWqe last = wqes.last();
        if (last == null) {
            finishLocally(new SendWqe.LocalOperation(wr, status, error));
        } else {
            if (last.localAfter == null) {
                last.localAfter = new ArrayList<>(2);
            }
            last.localAfter.add(new SendWqe.LocalOperation(wr, status, error));
        }
    }

    /** Reports a request that ran on this node: its completion, or its failure and the pair's move to ERROR. */
    private void finishLocally(SendWqe.LocalOperation op) {
        if (op.status() == CompletionStatus.SUCCESS) {
            qp.completeLocal(op.wr(), op.status(), null);
        } else {
            qp.failLocal(op.wr(), op.status(), op.error());
        }
    }

    private static java.util.Set<Access> accessOf(int mask) {
        java.util.EnumSet<Access> access = java.util.EnumSet.noneOf(Access.class);
        for (Access a : Access.values()) {
            if (a.in(mask)) {
                access.add(a);
            }
        }
        return access;
    }

    /** Whether the timeout sweep has anything to look at here (read without the pair's lock). */
    boolean sweepWanted() {
        return recovery.sweepWanted();
    }

    int outstanding() {
        return wqes.size();
    }

    // ---- transmitting -------------------------------------------------------------------------

    /** Sends what the window, the credits, the link and faults allow. */
    void pump(Outbox out) {
        if (recovery.paused() || pacing.waiting() || !faultsPending.isEmpty()) {
            return;
        }
        if (!refetching.isEmpty()) {
            requestDroppedResponses(out);
        }
        while (sendPsn < nextPsn && sendPsn < sendLimit && qp.sending()) {
            long unacked = unackedPsn();
            if (sendPsn < unacked) {
                sendPsn = unacked;
                continue;
            }
            if (sendPsn - unacked >= sendWindow) {
                break;
            }
            int index = wqes.indexOf(sendPsn);
            SendWqe wqe = wqes.get(index);
            String to;
            if (qp.datagram()) {
                boolean multicast = Lids.isMulticast(wqe.wr.datagram().lid());
                to = multicast ? Wire.ALL_NODES : wqe.wr.datagram().node();
                NicCounter dropped = wqe.wr.length() > mtu ? NicCounter.UNRELIABLE_DROPPED_TOO_LONG
                        : !multicast && (to == null || !wire.reaches(to)) ? NicCounter.UNRELIABLE_DROPPED_UNREACHABLE : null;
                if (dropped != null) {
                    // Lost on the way (no node has the address, or its link is down), or, longer than the MTU,
                    // never sent (InfiniBand's C10-93.1.1): either way the sender sees it complete, as UD's does.
                    counters.increment(dropped);
                    sendPsn++;
                    acknowledged(sendPsn - 1);
                    continue;
                }
                out.to(to);
            } else {
                to = qp.peer().node();
            }
            // Readiness is asked once per outgoing batch, not per packet: gRPC's isReady is advisory
            // and a batch goes out as one stream message.
            if (out.size() == 0 && !Wire.ALL_NODES.equals(to) && !wire.isWritable(to, qp.laneHint())) {
                recovery.linkWaiting(true, highestSent >= unacked);
                wire.waitForWritable(to, qp.linkWaiter);
                break;
            }
            recovery.linkWaiting(false, true);
            if (!pacing.hasRoom()) {
                break;
            }
            if (sendPsn == wqe.psnFirst && wqe.fenced() && readOrAtomicBefore(index)) {
                break; // IBV_SEND_FENCE: the READs and atomics posted before it finish first
            }
            boolean sent = switch (wqe.wr.opcode()) {
                case WRITE, WRITE_WITH_NOTIFY, WRITE_WITH_IMM, SEND, SEND_WITH_IMM, SEND_WITH_INVALIDATE -> sendDataSegment(wqe, out);
                case READ -> sendReadRequest(wqe, out, unacked);
                case FETCH_ADD, COMPARE_SWAP -> sendAtomic(wqe, out);
                case RECV, RECV_RDMA_WITH_IMM, BIND_WINDOW, LOCAL_INVALIDATE ->
                        throw new IllegalStateException(wqe.wr.opcode() + " is never on the send queue");
            };
            if (!sent) {
                break;
            }
            if (out.size() >= batchPackets) {
                out.flush();
            }
        }
    }

    /** Whether a READ or atomic posted before the request at {@code index} is still unfinished. */
    private boolean readOrAtomicBefore(int index) {
        for (int i = 0; i < index; i++) {
            SendWqe earlier = wqes.get(i);
            if ((earlier.isRead() || earlier.isAtomic()) && !earlier.done(ackedThrough)) {
                return true;
            }
        }
        return false;
    }

    void pacingTimerExpired() {
        pacing.timerExpired();
    }

    /** Sets or (null) removes this pair's own rate limit. */
    void rateLimit(SendAllowance limit) {
        pacing.limit(limit);
    }

    /** One segment of a message that carries data: a WRITE (any flavour) or a SEND. */
    private boolean sendDataSegment(SendWqe wqe, Outbox out) {
        int index = (int) (sendPsn - wqe.psnFirst);
        long offset = (long) index * mtu;
        int length = (int) Math.min(mtu, wqe.wr.length() - offset);
        boolean send = wqe.wr.isSend();
        long remote = wqe.wr.remoteAddress() + offset;
        boolean firstTransmission = sendPsn > chargedThrough;
        // Writes spend credits only where they may park in the responder's system buffer (a region's rkey
        // names its mode; a window's does not, so a write through one always spends, and the responder
        // grants back what did not park); a SEND does where the responder's receive buffers may park it,
        // for as many pages as its segment can touch: which buffer it lands in is the responder's choice.
        // UC spends none: nothing acknowledges it to grant them back, and its responder drops what it cannot place.
        if (send && index == 0 && firstTransmission) {
            wqe.sendSpendsCredits = credits.sendsSpend();
        }
        int parts = qp.unreliable() ? 0 : send ? (wqe.sendSpendsCredits ? Credits.perPacket(length, remotePageShift) : 0)
                : Regions.isWindowRkey(wqe.wr.rkey()) || regions.policy(Regions.modeOfRkey(wqe.wr.rkey())).spendsCredits()
                        ? DmaEngine.pagesSpanned(remote, length, remotePageShift) : 0;
        if (firstTransmission && !credits.canSpend(parts)) {
            return false;
        }
        if (!gatherOrFail(wqe, offset, length, out)) {
            return false;
        }
        if (firstTransmission) {
            countSent(wqe, offset, length);
            credits.spend(parts);
            chargedThrough = sendPsn;
        }
        boolean last = index == wqe.packets - 1;
        Opcode opcode = segmentOpcode(wqe.wr.opcode(), wqe.packets == 1, index == 0, last);
        Packet packet = qp.packet(out, opcode, sendPsn).setPayload(gathered, gatheredStart, length).setRetransmitted(resending());
        if (send && parts > 0) {
            packet.setCreditsSpent(parts);
        }
        Datagram datagram = wqe.wr.datagram();
        if (datagram != null) {
            // InfiniBand's DETH: the destination pair and the Q_Key (the high bit asks for this pair's own).
            packet.setDstQpn(datagram.qpn()).setQkey((datagram.qkey() & Datagram.OWN_QKEY) != 0 ? qp.qkey() : datagram.qkey())
                    .setGlobalRoute(datagram.globalRoute());
            if (Lids.isMulticast(datagram.lid())) {
                packet.setDstQpn(PacketRouter.MULTICAST_QPN).setMulticastLid(datagram.lid());
            }
        }
        if (!send) {
            packet.setRemoteAddress(remote).setRkey(wqe.wr.rkey());
            if (index == 0) {
                packet.setLength(wqe.wr.length()); // the message's length, as InfiniBand's RETH carries it on a first packet
            }
        }
        if (last) {
            switch (wqe.wr.opcode()) {
                case WRITE_WITH_NOTIFY -> packet.setCounterId(wqe.wr.counterId());
                case WRITE_WITH_IMM, SEND_WITH_IMM -> packet.setImmediate(wqe.wr.immediate());
                case SEND_WITH_INVALIDATE -> packet.setInvalidateRkey(wqe.wr.immediate());
                default -> { }
            }
            if (wqe.wr.solicited()) {
                packet.setSolicited(true); // InfiniBand's SE bit, on the packet that completes the receive
            }
        }
        pacing.spend(length);
        noteSent(sendPsn, sendPsn);
        sendPsn++;
        if (qp.unreliable()) {
            acknowledged(sendPsn - 1); // UC: a request is done once its packets are out
        }
        return true;
    }

    /** The wire opcode of a segment: ONLY for a one-packet message, else FIRST, MIDDLE..., LAST. */
    private static Opcode segmentOpcode(Completion.Opcode kind, boolean only, boolean first, boolean last) {
        return switch (kind) {
            case WRITE -> only ? Opcode.WRITE_ONLY : first ? Opcode.WRITE_FIRST : last ? Opcode.WRITE_LAST : Opcode.WRITE_MIDDLE;
            case WRITE_WITH_NOTIFY -> only ? Opcode.WRITE_ONLY_WITH_NOTIFY : first ? Opcode.WRITE_FIRST
                    : last ? Opcode.WRITE_LAST_WITH_NOTIFY : Opcode.WRITE_MIDDLE;
            case WRITE_WITH_IMM -> only ? Opcode.WRITE_ONLY_WITH_IMMEDIATE : first ? Opcode.WRITE_FIRST
                    : last ? Opcode.WRITE_LAST_WITH_IMMEDIATE : Opcode.WRITE_MIDDLE;
            case SEND -> only ? Opcode.SEND_ONLY : first ? Opcode.SEND_FIRST : last ? Opcode.SEND_LAST : Opcode.SEND_MIDDLE;
            case SEND_WITH_IMM -> only ? Opcode.SEND_ONLY_WITH_IMMEDIATE : first ? Opcode.SEND_FIRST
                    : last ? Opcode.SEND_LAST_WITH_IMMEDIATE : Opcode.SEND_MIDDLE;
            case SEND_WITH_INVALIDATE -> only ? Opcode.SEND_ONLY : first ? Opcode.SEND_FIRST : last ? Opcode.SEND_LAST : Opcode.SEND_MIDDLE;
            default -> throw new IllegalArgumentException(kind + " carries no data segments");
        };
    }

    private boolean sendReadRequest(SendWqe wqe, Outbox out, long unacked) {
        int index = wqe.responses.nextClearBit((int) (sendPsn - wqe.psnFirst));
        if (index >= wqe.packets) {
            sendPsn = wqe.psnLast() + 1;
            return true;
        }
        long room = sendWindow - (wqe.psnFirst + index - unacked);
        // Ask again only for what is missing: responses already placed are not requested twice (a
        // go-back-N re-request of the whole window turns each receive fault into a burst of duplicates
        // that queue ahead of the one response the requester waits for).
        int received = wqe.responses.nextSetBit(index);
        int missing = received < 0 ? wqe.packets - index : received - index;
        int count = (int) Math.min(Math.min(ctx.readRequestPackets(), missing), Math.max(1, room));
        requestResponses(wqe, index, count, out);
        sendPsn = wqe.psnFirst + index + count;
        return true;
    }

    /** Sends a READ request for {@code count} responses of a READ from response {@code index} on. */
    private void requestResponses(SendWqe wqe, int index, int count, Outbox out) {
        long offset = (long) index * mtu;
        int length = (int) Math.min((long) count * mtu, wqe.wr.length() - offset);
        long psn = wqe.psnFirst + index;
        // A request for responses asked before (a resend, or a refetch of dropped ones) is a retransmission.
        qp.packet(out, Opcode.READ_REQUEST, psn).setRemoteAddress(wqe.wr.remoteAddress() + offset)
                .setRkey(wqe.wr.rkey()).setLength(length).setRetransmitted(psn <= highestSent);
        pacing.spend(length); // the responses it asks for cross the link on this session's behalf
        noteSent(psn, psn + count - 1);
    }

    /**
     * Asks again for exactly the READ responses that were dropped on a local fault, in runs of
     * consecutive PSNs, leaving the rest of the window alone: what is still in flight arrives as it
     * would have, so one fault costs one response more, not a window of duplicates.
     */
    private void requestDroppedResponses(Outbox out) {
        NicCounter cause = resendCause;
        resendCause = NicCounter.RETRANSMITTED_READ_REFETCH;
        for (SendWqe wqe : refetching) {
            if (wqes.indexOf(wqe.psnFirst) < 0 || !qp.sending()) {
                wqe.refetch.clear();
                continue;
            }
            for (int first = wqe.refetch.nextSetBit(0); first >= 0; first = wqe.refetch.nextSetBit(first)) {
                int end = Math.min(wqe.refetch.nextClearBit(first), first + ctx.readRequestPackets());
                requestResponses(wqe, first, end - first, out);
                wqe.refetch.clear(first, end);
                first = end;
            }
        }
        refetching.clear();
        resendCause = cause;
    }

    private boolean sendAtomic(SendWqe wqe, Outbox out) {
        WorkRequest wr = wqe.wr;
        Packet packet = qp.packet(out, wr.opcode() == Completion.Opcode.COMPARE_SWAP ? Opcode.COMPARE_SWAP : Opcode.FETCH_ADD, sendPsn)
                .setAdd(wr.add()).setRetransmitted(resending());
        if (wr.rkey() != 0) {
            packet.setRkey(wr.rkey()).setRemoteAddress(wr.remoteAddress()).setSwap(wr.swap());
        } else {
            packet.setCounterId(wr.counterId());
        }
        pacing.spend(Long.BYTES);
        noteSent(sendPsn, sendPsn);
        sendPsn++;
        return true;
    }

    /** Whether the packet at sendPsn went out before: this is its retransmission. */
    private boolean resending() {
        return sendPsn <= highestSent;
    }

    private void noteSent(long firstPsn, long lastPsn) {
        if (highestSent < unackedPsn()) {
            // Nothing was in flight: the acknowledgement timer starts now.
            recovery.restartTimer();
        }
        if (firstPsn <= highestSent) {
            counters.increment(resendCause);
        }
        highestSent = Math.max(highestSent, lastPsn);
    }

    /**
     * Gathers the payload of [offset, offset + length) of the request's message from its elements into
     * the outbox's staging array: true with the bytes at [{@link #gatheredStart}, + length) of
     * {@link #gathered}, or false after raising a send-side fault or failing the request.
     */
    private boolean gatherOrFail(SendWqe wqe, long offset, int length, Outbox out) {
        gathered = out.staging();
        gatheredStart = 0;
        if (length == 0) {
            return true;
        }
        List<Segment> segments = wqe.wr.segments();
        out.beginPayload();
        try {
            int total = 0;
            long start = 0; // where element i begins in the message
            for (int i = 0; i < segments.size() && length > 0; i++) {
                Segment e = segments.get(i);
                long end = start + e.length();
                if (offset < end) {
                    int take = (int) Math.min(end - offset, length);
                    int at = dma.gather(wqe.regions[i], e.address() + (offset - start), take, Side.SEND, resending(), out, notResident);
                    if (at == DmaEngine.NOT_STAGED) {
                        raiseFault(wqe, wqe.regions[i], notResident[0], false, Side.SEND, out);
                        return false;
                    }
                    byte[] staging = out.staging();
                    if (total == 0) {
                        gathered = staging;
                        gatheredStart = at;
                    } else if (staging != gathered || at != gatheredStart + total) {
                        // The staging array filled up and a new one began between elements: the pieces go
                        // together into the new one (they are staged one after the other otherwise).
                        byte[] before = gathered;
                        int beforeStart = gatheredStart;
                        int joined = out.reserve(total + take);
                        byte[] into = out.staging();
                        System.arraycopy(before, beforeStart, into, joined, total);
                        System.arraycopy(staging, at, into, joined + total, take);
                        gathered = into;
                        gatheredStart = joined;
                    }
                    total += take;
                    offset += take;
                    length -= take;
                }
                start = end;
            }
            return true;
        } catch (RegionInvalidException | KernelException e) {
            failLocally(wqe, e);
        } finally {
            out.endPayload();
        }
        return false;
    }

    /** Counts [offset, offset + length) of the message as sent from the regions it lies in. */
    private static void countSent(SendWqe wqe, long offset, int length) {
        List<Segment> segments = wqe.wr.segments();
        long start = 0;
        for (int i = 0; i < segments.size() && length > 0; i++) {
            long end = start + segments.get(i).length();
            if (offset < end) {
                int take = (int) Math.min(end - offset, length);
                wqe.regions[i].counters().sent(take);
                offset += take;
                length -= take;
            }
            start = end;
        }
    }

    /** Fails a request whose local memory failed it: a region gone or a bad address is a protection error, the rest a memory error. */
    private void failLocally(SendWqe wqe, RuntimeException e) {
        qp.fail(wqe, e instanceof RegionInvalidException || e instanceof BadAddressException ? CompletionStatus.LOCAL_PROTECTION_ERROR
                : CompletionStatus.LOCAL_MEMORY_ERROR, e.getMessage());
    }

    /** A local page is not resident: fault it in and pause the queue pair until it is. */
    private void raiseFault(SendWqe wqe, MemoryRegion region, long vpn, boolean write, Side side, Outbox out) {
        out.flush();
        if (!faultsPending.add(vpn)) {
            return;
        }
        nic.kernel().faultService().submit(region.endpoint().space(), vpn, write)
                .whenComplete((fault, error) -> qp.onLocalFaultResolved(wqe, region, side, vpn, fault, error));
    }

    /** The fault that paused the queue pair was served (or failed). */
    void faultResolved(SendWqe wqe, MemoryRegion region, Side side, long vpn, PageFault fault, Throwable error, Outbox out) {
        faultsPending.remove(vpn);
        // Time spent waiting for a local page is not the responder's silence: the acknowledgement
        // timer starts again from here, as it does after an RNR delay.
        recovery.restartTimer();
        if (error != null) {
            Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
            CompletionStatus status = cause instanceof BadAddressException ? CompletionStatus.LOCAL_PROTECTION_ERROR
                    : CompletionStatus.LOCAL_MEMORY_ERROR;
            if (wqes.indexOf(wqe.psnFirst) >= 0) {
                qp.fail(wqe, status, "a local page fault failed: " + cause.getMessage());
            }
            return;
        }
        nic.observers().faultServed(region, side, fault.kind(), fault.serviceTimeNs());
        region.policy().faultServed(region, vpn, fault.translation());
        if (wqe.isAtomic() && wqe.atomicDone && !wqe.atomicPlaced && wqes.indexOf(wqe.psnFirst) >= 0) {
            wqe.atomicPlaced = placeAtomicResult(wqe, out);
            completeFinished();
        }
    }

    // ---- answers from the responder ----------------------------------------------------------------

    void onAcknowledge(Packet packet) {
        credits.peerGranted(packet.getCreditLimit(), packet.getReceivesPark());
        long psn = packet.getAckPsn();
        switch (packet.getSyndrome()) {
            case ACK -> acknowledged(psn);
            case NAK_SEQUENCE_ERROR -> {
                counters.increment(NicCounter.SEQUENCE_NAKS_RECEIVED);
                acknowledged(psn - 1);
                rewind(psn, NicCounter.RETRANSMITTED_AFTER_SEQUENCE_NAK);
            }
            case RNR_NAK -> {
                counters.increment(NicCounter.RNR_NAKS_RECEIVED);
                acknowledged(psn - 1);
                receiverNotReady(psn, packet.getRnrDelayNs());
            }
            case NAK_REMOTE_ACCESS_ERROR -> refused(psn, CompletionStatus.REMOTE_ACCESS_ERROR, packet.getError());
            case NAK_INVALID_REQUEST -> refused(psn, CompletionStatus.REMOTE_INVALID_REQUEST_ERROR, packet.getError());
            case NAK_REMOTE_OPERATIONAL_ERROR -> refused(psn, CompletionStatus.REMOTE_OPERATIONAL_ERROR, packet.getError());
            default -> counters.increment(NicCounter.DROPPED_PACKETS);
        }
    }

    void onReadResponse(Packet packet, Outbox out) {
        int index = wqes.indexOf(packet.getPsn());
        if (index < 0 || !wqes.get(index).isRead()) {
            counters.increment(NicCounter.DUPLICATE_PACKETS);
            return;
        }
        SendWqe wqe = wqes.get(index);
        int response = (int) (packet.getPsn() - wqe.psnFirst);
        if (wqe.responses.get(response)) {
            counters.increment(NicCounter.DUPLICATE_PACKETS);
            return;
        }
        long offset = (long) response * mtu;
        int expected = (int) Math.min(mtu, wqe.wr.length() - offset);
        if (packet.payloadLength() != expected) {
            counters.increment(NicCounter.DROPPED_PACKETS);
            return;
        }
        if (!scatterResponse(wqe, offset, packet.payloadBuffer(), packet.getPsn(), packet.getRetransmitted(), out)) {
            return;
        }
        wqe.responses.set(response);
        wqe.responsesReceived++;
        recovery.progressed();
        completeFinished();
    }

    /**
     * Writes a READ response's payload at message offset {@code offset} of the request's elements; false
     * after dropping it for a page that is not resident (asked for again once it is), or failing the request.
     */
    private boolean scatterResponse(SendWqe wqe, long offset, ByteBuffer src, long psn, boolean again, Outbox out) {
        try {
            List<Segment> segments = wqe.wr.segments();
            long start = 0;
            for (int i = 0; i < segments.size() && src.hasRemaining(); i++) {
                Segment e = segments.get(i);
                long end = start + e.length();
                if (offset < end) {
                    int take = (int) Math.min(end - offset, src.remaining());
                    long missing = scatter(wqe.regions[i], e.address() + (offset - start), src, take, Side.READ_TARGET, again, out);
                    if (missing >= 0) {
                        // Drop this response; once the page is in, ask again for it alone.
                        if (wqe.refetch == null) {
                            wqe.refetch = new BitSet(wqe.packets);
                        }
                        if (wqe.refetch.isEmpty()) {
                            refetching.add(wqe);
                        }
                        wqe.refetch.set((int) (psn - wqe.psnFirst));
                        raiseFault(wqe, wqe.regions[i], missing, true, Side.READ_TARGET, out);
                        return false;
                    }
                    wqe.regions[i].counters().received(take);
                    offset += take;
                }
                start = end;
            }
            return true;
        } catch (RegionInvalidException | KernelException e) {
            failLocally(wqe, e);
        }
        return false;
    }

    /**
     * Writes the next {@code length} bytes of {@code src} at {@code va} of a region, page by page.
     *
     * @return the first page that is not resident (nothing from it on was written), or -1 when all is in
     */
    private long scatter(MemoryRegion region, long va, ByteBuffer src, int length, Side side, boolean again, Outbox out) {
        int pageSize = dma.pageSize();
        int done = 0;
        while (done < length) {
            long at = va + done;
            int pageOffset = (int) (at & (pageSize - 1));
            int chunk = Math.min(pageSize - pageOffset, length - done);
            long vpn = at >>> dma.pageShift();
            long t = dma.acquire(region, vpn, true, side, again, out::flush);
            if (t == RegionPolicy.NOT_RESIDENT) {
                return vpn;
            }
            int limit = src.limit();
            src.limit(src.position() + chunk);
            try {
                dma.memory().write(Tlb.frameOf(t), pageOffset, src);
            } finally {
                src.limit(limit);
                dma.release(t, true);
            }
            done += chunk;
        }
        return -1;
    }

    /**
     * Puts an atomic's fetched word in its local buffer, in the host's byte order, before the atomic
     * completes (as an HCA writes it); false after raising a fault for a page of the buffer that is not
     * resident, which places it once served. True at once for an atomic without a buffer.
     */
    private boolean placeAtomicResult(SendWqe wqe, Outbox out) {
        ByteBuffer word = ByteBuffer.allocate(Long.BYTES).order(ByteOrder.nativeOrder()).putLong(0, wqe.atomicResult);
        try {
            List<Segment> segments = wqe.wr.segments();
            for (int i = 0; i < segments.size(); i++) {
                Segment e = segments.get(i);
                if (e.length() == 0) {
                    continue;
                }
                int from = word.position();
                long missing = scatter(wqe.regions[i], e.address(), word, e.length(), Side.READ_TARGET, false, out);
                if (missing >= 0) {
                    raiseFault(wqe, wqe.regions[i], missing, true, Side.READ_TARGET, out);
                    return false;
                }
                wqe.regions[i].counters().received(word.position() - from);
            }
            return true;
        } catch (RegionInvalidException | KernelException e) {
            failLocally(wqe, e);
        }
        return false;
    }

    void onAtomicAcknowledge(Packet packet, Outbox out) {
        int index = wqes.indexOf(packet.getPsn());
        if (index < 0 || !wqes.get(index).isAtomic()) {
            counters.increment(NicCounter.DUPLICATE_PACKETS);
            return;
        }
        SendWqe wqe = wqes.get(index);
        if (!wqe.atomicDone) {
            wqe.atomicDone = true;
            wqe.atomicResult = packet.getAtomicResult();
            wqe.atomicPlaced = placeAtomicResult(wqe, out);
        }
        credits.peerGranted(packet.getCreditLimit(), packet.getReceivesPark());
        acknowledged(packet.getPsn() - 1);
        recovery.progressed();
        completeFinished();
    }

    private void acknowledged(long psn) {
        if (psn > ackedThrough && psn < nextPsn) {
            ackedThrough = psn;
            recovery.progressed();
            recovery.acknowledgedThrough(psn);
        }
        completeFinished();
    }

    private void completeFinished() {
        int finished = 0;
        try {
            while (!wqes.isEmpty()) {
                SendWqe wqe = wqes.first();
                if (!wqe.done(ackedThrough)) {
                    return;
                }
                wqes.removeFirst();
                finished++;
                // A finished READ or FETCH_ADD acknowledges itself and everything before it.
                ackedThrough = Math.max(ackedThrough, wqe.psnLast());
                qp.complete(wqe, CompletionStatus.SUCCESS, null);
                if (wqe.localAfter != null) {
                    for (SendWqe.LocalOperation op : wqe.localAfter) {
                        finishLocally(op);
                        if (!qp.sending()) {
                            return; // a failed one moved the pair to ERROR and flushed the rest
                        }
                    }
                }
            }
        } finally {
            if (finished > 0) {
                qp.endpoint().retireWorkRequests(finished); // once per acknowledgement, not per request
            }
        }
    }

    private void refused(long psn, CompletionStatus status, String error) {
        acknowledged(psn - 1);
        int index = wqes.indexOf(psn);
        if (index >= 0) {
            qp.fail(wqes.get(index), status, "node " + qp.peer().node() + " refused the request: " + error);
        }
    }

    private void rewind(long psn, NicCounter cause) {
        long to = Math.max(psn, unackedPsn());
        if (to < sendPsn) {
            sendPsn = to;
            resendCause = cause;
        }
    }

    private void receiverNotReady(long psn, long delayNs) {
        switch (recovery.receiverNotReady(psn)) {
            case WAIT -> {
                rewind(psn, NicCounter.RETRANSMITTED_AFTER_RNR_NAK);
                nic.timers().schedule(Recovery.rnrDelayNs(delayNs), qp::onRnrTimerExpired);
            }
            case GIVE_UP -> {
                int index = wqes.indexOf(psn);
                if (index >= 0) {
                    qp.fail(wqes.get(index), CompletionStatus.RNR_RETRY_EXCEEDED, recovery.rnrGaveUp(qp.peer().node(), psn));
                }
            }
            case ALREADY_WAITING -> { }
        }
    }

    void rnrTimerExpired() {
        recovery.rnrTimerExpired();
    }

    // ---- timers and recovery ----------------------------------------------------------------------

    /** @return true when the acknowledgement timer expired and packets are to be sent again */
    boolean checkTimeout(long now) {
        if (wqes.isEmpty()) {
            recovery.idle();
            return false;
        }
        if (!faultsPending.isEmpty()) {
            return false;
        }
        long unacked = unackedPsn();
        switch (recovery.checkTimeout(now, highestSent >= unacked)) {
            case RESEND -> {
                sendPsn = unacked;
                resendCause = NicCounter.RETRANSMITTED_AFTER_ACK_TIMEOUT;
                forgetRefetches();
                return true;
            }
            case GIVE_UP -> qp.fail(wqes.first(), CompletionStatus.RETRY_EXCEEDED, recovery.timeoutGaveUp(qp.peer()));
            case NOT_YET -> { }
        }
        return false;
    }

    /** The link to the peer came back: everything unacknowledged goes again (the responder drops what it has). */
    void replay() {
        sendPsn = unackedPsn();
        resendCause = NicCounter.RETRANSMITTED_AFTER_LANE_LOSS;
        forgetRefetches();
        recovery.restartTimer();
    }

    /** Going back to the first unacknowledged PSN asks for every missing response anyway. */
    private void forgetRefetches() {
        for (SendWqe wqe : refetching) {
            wqe.refetch.clear();
        }
        refetching.clear();
    }

    private long unackedPsn() {
        SendWqe head = wqes.first();
        return head == null ? nextPsn : head.firstUnacked(ackedThrough);
    }

    /** The sequence state, for diagnostics. */
    String describe() {
        return String.format("requester next=%d send=%d acked=%d highestSent=%d unacked=%d wqes=%d%s%s%s",
                nextPsn, sendPsn, ackedThrough, highestSent, unackedPsn(), wqes.size(), recovery.describe(),
                faultsPending.isEmpty() ? "" : " fault-wait(" + faultsPending.size() + ")", pacing.waiting() ? " pacing-wait" : "");
    }

    /** The oldest outstanding request, or null. */
    SendWqe oldest() {
        return wqes.first();
    }

    /** Drops every outstanding request without a completion: the pair was reset, as RESET drops a send queue. */
    void discardAll() {
        if (!wqes.isEmpty()) {
            qp.endpoint().retireWorkRequests(wqes.size());
        }
        while (!wqes.isEmpty()) {
            wqes.removeFirst();
        }
        sendPsn = nextPsn;
    }

    /** Completes every outstanding request, in order: {@code failed} with its status, the rest as flushed. */
    void failAll(SendWqe failed, CompletionStatus status, String error, String flushReason) {
        if (!wqes.isEmpty()) {
            qp.endpoint().retireWorkRequests(wqes.size());
        }
        while (!wqes.isEmpty()) {
            SendWqe wqe = wqes.removeFirst();
            if (wqe == failed) {
                qp.complete(wqe, status, error);
            } else {
                qp.complete(wqe, CompletionStatus.FLUSHED, flushReason);
            }
            if (wqe.localAfter != null) {
                // They ran when posted; their completions are flushed with the rest of the queue.
                wqe.localAfter.forEach(op -> qp.completeLocal(op.wr(), CompletionStatus.FLUSHED, flushReason));
            }
        }
        sendPsn = nextPsn;
    }
}
