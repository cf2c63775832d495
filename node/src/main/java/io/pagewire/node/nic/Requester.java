package io.pagewire.node.nic;

import io.pagewire.kernel.KernelException;
import io.pagewire.proto.fabric.Opcode;
import java.util.ArrayList;
import java.util.List;

/**
 * The sending half of a queue pair (the requester of InfiniBand RC, rxe's requester): it numbers
 * posted requests once {@link WorkRequestChecks} accepts them, segments messages at the MTU and keeps
 * at most a window of PSNs outstanding. What it may send is its {@link Credits}' and its {@link Pacing}'s
 * to say; its {@link Completer} retires what the responder answers and moves the send point back when
 * packets must go again. Guarded by the queue pair's lock.
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
    private final SendQueue sq;
    private final WqeRing wqes;
    private final WorkRequestChecks checks;
    private final Completer completer;
    private final Recovery recovery;
    private final LocalFaults faults;
    private final Pacing pacing;
    private final Credits credits;
    /** Where the last {@link #gatherOrFail} put its payload: an array of the outbox's, and the payload's start in it. */
    private byte[] gathered;
    private int gatheredStart;
    private final long[] notResident = new long[1];
    /** No packet at or after this PSN goes out: where a send queue drain (SQD) stops; unbounded otherwise. */
    private long sendLimit = Long.MAX_VALUE;
    /** Credits were spent for every PSN up to this one (retransmissions spend none). */
    private long chargedThrough = -1;
    private int remotePageShift;

    Requester(QueuePair qp, SendQueue sq, Recovery recovery, LocalFaults faults, Completer completer) {
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
        this.sq = sq;
        this.wqes = sq.wqes;
        this.checks = new WorkRequestChecks(qp.endpoint(), nic);
        this.completer = completer;
        this.recovery = recovery;
        this.faults = faults;
        this.credits = qp.credits();
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
            sq.startAt(attributes.sendPsn());
            chargedThrough = sq.nextPsn - 1;
        }
    }

    /**
     * Starts draining the send queue (SQD): requests with a packet out already finish, the rest wait
     * until {@link #resume}.
     */
    void drain() {
        long started = Math.max(sq.sendPsn - 1, sq.highestSent);
        long unacked = sq.unackedPsn();
        int index = started < unacked ? -1 : wqes.indexOf(started);
        sendLimit = index < 0 ? Math.max(started + 1, unacked) : wqes.get(index).psnLast() + 1;
    }

    /** Whether every request started before the drain began is finished. */
    boolean drained() {
        return sq.unackedPsn() >= sendLimit;
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
        int packets = checks.packets(wr, qp.datagram(), qp.unreliable());
        MemoryRegion[] regions = checks.localRegions(wr);
        qp.endpoint().admitWorkRequest(wr.wrId());
        SendWqe wqe = new SendWqe(wr, regions, sq.nextPsn, packets, nic.clock().nanoTime());
        wqes.add(wqe);
        sq.nextPsn += packets;
        recovery.workQueued();
        String foreign = WorkRequestChecks.protectionMismatch(regions, qp.protectionDomain());
        if (foreign != null) {
            // Posted, then failed where it stands, as an HCA fails a request whose lkey is of another PD.
            qp.fail(wqe, CompletionStatus.LOCAL_PROTECTION_ERROR, "work request " + wr.wrId() + ": " + foreign);
        }
    }

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
            completer.finishLocally(new SendWqe.LocalOperation(wr, status, error));
        } else {
            if (last.localAfter == null) {
                last.localAfter = new ArrayList<>(2);
            }
            last.localAfter.add(new SendWqe.LocalOperation(wr, status, error));
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
        if (recovery.paused() || pacing.waiting() || faults.any()) {
            return;
        }
        if (!sq.refetching.isEmpty()) {
            requestDroppedResponses(out);
        }
        while (sq.sendPsn < sq.nextPsn && sq.sendPsn < sendLimit && qp.sending()) {
            long unacked = sq.unackedPsn();
            if (sq.sendPsn < unacked) {
                sq.sendPsn = unacked;
                continue;
            }
            if (sq.sendPsn - unacked >= sendWindow) {
                break;
            }
            int index = wqes.indexOf(sq.sendPsn);
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
                    sq.sendPsn++;
                    completer.acknowledged(sq.sendPsn - 1);
                    continue;
                }
                out.to(to);
            } else {
                to = qp.peer().node();
            }
            // Readiness is asked once per outgoing batch, not per packet: gRPC's isReady is advisory
            // and a batch goes out as one stream message.
            if (out.size() == 0 && !Wire.ALL_NODES.equals(to) && !wire.isWritable(to, qp.laneHint())) {
                recovery.linkWaiting(true, sq.highestSent >= unacked);
                wire.waitForWritable(to, qp.linkWaiter);
                break;
            }
            recovery.linkWaiting(false, true);
            if (!pacing.hasRoom()) {
                break;
            }
            if (sq.sendPsn == wqe.psnFirst && wqe.fenced() && readOrAtomicBefore(index)) {
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
            if ((earlier.isRead() || earlier.isAtomic()) && !earlier.done(sq.ackedThrough)) {
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
        int index = (int) (sq.sendPsn - wqe.psnFirst);
        long offset = (long) index * mtu;
        int length = (int) Math.min(mtu, wqe.wr.length() - offset);
        boolean send = wqe.wr.isSend();
        long remote = wqe.wr.remoteAddress() + offset;
        boolean firstTransmission = sq.sendPsn > chargedThrough;
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
            chargedThrough = sq.sendPsn;
        }
        boolean last = index == wqe.packets - 1;
        Opcode opcode = segmentOpcode(wqe.wr.opcode(), wqe.packets == 1, index == 0, last);
        Packet packet = qp.packet(out, opcode, sq.sendPsn).setPayload(gathered, gatheredStart, length).setRetransmitted(sq.resending());
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
        noteSent(sq.sendPsn, sq.sendPsn);
        sq.sendPsn++;
        if (qp.unreliable()) {
            completer.acknowledged(sq.sendPsn - 1); // UC: a request is done once its packets are out
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
        int index = wqe.responses.nextClearBit((int) (sq.sendPsn - wqe.psnFirst));
        if (index >= wqe.packets) {
            sq.sendPsn = wqe.psnLast() + 1;
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
        sq.sendPsn = wqe.psnFirst + index + count;
        return true;
    }

    /** Sends a READ request for {@code count} responses of a READ from response {@code index} on. */
    private void requestResponses(SendWqe wqe, int index, int count, Outbox out) {
        long offset = (long) index * mtu;
        int length = (int) Math.min((long) count * mtu, wqe.wr.length() - offset);
        long psn = wqe.psnFirst + index;
        // A request for responses asked before (a resend, or a refetch of dropped ones) is a retransmission.
        qp.packet(out, Opcode.READ_REQUEST, psn).setRemoteAddress(wqe.wr.remoteAddress() + offset)
                .setRkey(wqe.wr.rkey()).setLength(length).setRetransmitted(psn <= sq.highestSent);
        pacing.spend(length); // the responses it asks for cross the link on this session's behalf
        noteSent(psn, psn + count - 1);
    }

    /**
     * Asks again for exactly the READ responses that were dropped on a local fault, in runs of
     * consecutive PSNs, leaving the rest of the window alone: what is still in flight arrives as it
     * would have, so one fault costs one response more, not a window of duplicates.
     */
    private void requestDroppedResponses(Outbox out) {
        NicCounter cause = sq.resendCause;
        sq.resendCause = NicCounter.RETRANSMITTED_READ_REFETCH;
        for (SendWqe wqe : sq.refetching) {
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
        sq.refetching.clear();
        sq.resendCause = cause;
    }

    private boolean sendAtomic(SendWqe wqe, Outbox out) {
        WorkRequest wr = wqe.wr;
        Packet packet = qp.packet(out, wr.opcode() == Completion.Opcode.COMPARE_SWAP ? Opcode.COMPARE_SWAP : Opcode.FETCH_ADD, sq.sendPsn)
                .setAdd(wr.add()).setRetransmitted(sq.resending());
        if (wr.rkey() != 0) {
            packet.setRkey(wr.rkey()).setRemoteAddress(wr.remoteAddress()).setSwap(wr.swap());
        } else {
            packet.setCounterId(wr.counterId());
        }
        pacing.spend(Long.BYTES);
        noteSent(sq.sendPsn, sq.sendPsn);
        sq.sendPsn++;
        return true;
    }

    private void noteSent(long firstPsn, long lastPsn) {
        if (sq.highestSent < sq.unackedPsn()) {
            // Nothing was in flight: the acknowledgement timer starts now.
            recovery.restartTimer();
        }
        if (firstPsn <= sq.highestSent) {
            counters.increment(sq.resendCause);
        }
        sq.highestSent = Math.max(sq.highestSent, lastPsn);
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
                    int at = dma.gather(wqe.regions[i], e.address() + (offset - start), take, Side.SEND, sq.resending(), out, notResident);
                    if (at == DmaEngine.NOT_STAGED) {
                        faults.raise(wqe, wqe.regions[i], notResident[0], false, Side.SEND, out);
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
            qp.fail(wqe, LocalFaults.statusOf(e), e.getMessage());
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

    /** The sequence state, for diagnostics. */
    String describe() {
        return sq.describe() + recovery.describe() + faults.describe() + (pacing.waiting() ? " pacing-wait" : "");
    }
}
