package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.BadAddressException;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.SystemBufferFullException;
import io.pagewire.proto.fabric.Opcode;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.List;
import java.util.TreeMap;
import org.agrona.collections.LongHashSet;

/**
 * Where a responder's received data goes: the pages of an RDMA WRITE's target, or of the posted
 * receive a SEND lands in, each under its region's {@link RegionPolicy} (PIN_ON_MISS stalls while the
 * kernel pins, ON_DEMAND raises a fault and says not ready, SHADOW parks the part in the system
 * buffer). Parked data is credited and followed by what it makes visible (a notification, a receive's
 * completion) only once it is in place, so neither is ever seen before its data, and both stay in
 * PSN order. The {@link Responder} decides what to execute and when; this places it. Guarded by the
 * queue pair's lock.
 */
final class ReceivePlacement {
    /** What became of a request's data. */
    enum Result {
        /** In place, or parked and placed later. */
        PLACED,
        /** Not taken: answer RNR NAK, the requester sends it again. */
        NOT_READY,
        /** Refused: the target's key, range or right was bad, or its memory went ({@link #error()} says). */
        ACCESS_ERROR,
        /** Refused: the target's memory could not be brought in. */
        OPERATIONAL_ERROR,
        /** Refused: the packet does not fit the message it continues. */
        INVALID,
        /** The SEND does not fit its receive buffer: the receive fails (see {@link #failReceive}), the request is refused. */
        LENGTH_ERROR,
        /** The receive buffer's region went: the receive fails, the request is refused. */
        PROTECTION_ERROR,
        /** The receive buffer's page could not be brought in: the receive fails, the request is refused. */
        MEMORY_ERROR,
        /** The SEND_WITH_INVALIDATE named no window this endpoint may invalidate: the receive fails, the request is refused. */
        INVALIDATE_ERROR
    }

    private final QueuePair qp;
    private final PairCompletions completions;
    private final NicServices nic;
    private final NicCounters counters;
    private final DmaEngine dma;
    private final Credits credits;
    private final int mtu;
    private String error;
    /** Whether the last NOT_READY was a NIC page fault on the target (not a missing receive or a full system buffer). */
    private boolean faulted;

    /** Parked parts not yet in place, by PSN. */
    private final TreeMap<Long, Integer> parkedByPsn = new TreeMap<>();
    /** PSNs of SEND segments that spent no credits (see {@link Credits#sendsSpend}): what they park is granted nothing when placed. */
    private final LongHashSet unspentPsns = new LongHashSet();
    /** Notifications and receive completions waiting for parked data before them, in PSN order. */
    private final ArrayDeque<Delivery> deliveries = new ArrayDeque<>();
    /** The posted receive the SEND in progress lands in, and the PSN that SEND began at. */
    private ReceiveQueue.Posted receiving;
    private long receivingFirstPsn;
    /** The receive a WRITE_WITH_IMM took and holds until its data is placed (a resend after RNR keeps it), and its PSN. */
    private ReceiveQueue.Posted immediateReceive;
    private long immediateReceivePsn = -1;
    /** Bytes of the WRITE in progress so far (a WRITE_WITH_IMM's receive completion reports its length). */
    private long writeMessageBytes;
    /** The address range [from, end) of the WRITE message being received, as its first packet gave it. */
    private long writeMessageFrom;
    private long writeMessageEnd;

    ReceivePlacement(QueuePair qp) {
        this.qp = qp;
        this.completions = qp.completions();
        this.nic = qp.resources().services();
        this.counters = nic.counters();
        this.dma = nic.dma();
        this.credits = qp.credits();
        this.mtu = nic.context().mtuBytes();
    }

    /** Why the last result was an error. */
    String error() {
        return error;
    }

    /** Whether the NOT_READY just returned was a NIC page fault, forgetting it. */
    boolean takeFaulted() {
        boolean was = faulted;
        faulted = false;
        return was;
    }

    // ---- RDMA WRITE ------------------------------------------------------------------------------------------

    /**
     * Places an RDMA WRITE packet's data in {@code region} (already checked for the key, range and right;
     * null for a zero-length WRITE, which names no memory),
     * then what it makes visible: {@code notify}'s increment for WRITE_WITH_NOTIFY, a receive's completion
     * for WRITE_WITH_IMM, which takes the next posted receive first (none: NOT_READY).
     */
    Result write(MemoryRegion region, Packet packet, EventCounter notify, Outbox out) {
        long psn = packet.getPsn();
        boolean immediate = packet.getOpcode() == Opcode.WRITE_LAST_WITH_IMMEDIATE || packet.getOpcode() == Opcode.WRITE_ONLY_WITH_IMMEDIATE;
        if (immediate && immediateReceivePsn != psn) {
            // Taken before the data lands, so no other queue pair of a shared receive queue can take
            // the last one meanwhile; held across resends until the data is in.
            releaseImmediateReceive();
            ReceiveQueue.Posted taken = qp.receives().take();
            if (taken == null) {
                counters.increment(qp.unreliable() ? NicCounter.UNRELIABLE_DROPPED_NO_RECEIVE : NicCounter.NO_RECEIVE_RNR_NAKS_SENT);
                return Result.NOT_READY;
            }
            immediateReceive = taken;
            immediateReceivePsn = psn;
        }
        int size = packet.payloadLength();
        int direct;
        try {
            direct = region == null ? 0 : place(region, packet.getRemoteAddress(), writeOperationEnd(packet), packet.payloadBuffer(), psn,
                    Side.RECEIVE, packet.getRetransmitted(), out);
        } catch (SystemBufferFullException e) {
            if (qp.unreliable()) {
                counters.increment(NicCounter.UNRELIABLE_DROPPED_FAULT);
            }
            return Result.NOT_READY;
        } catch (RegionInvalidException | BadAddressException e) {
            releaseImmediateReceive();
            return fail(Result.ACCESS_ERROR, e.getMessage());
        } catch (KernelException e) {
            releaseImmediateReceive();
            return fail(Result.OPERATIONAL_ERROR, e.getMessage());
        }
        if (direct < 0) {
            if (qp.unreliable()) {
                counters.increment(NicCounter.UNRELIABLE_DROPPED_FAULT);
            }
            return Result.NOT_READY;
        }
        if (region != null) {
            region.counters().received(size);
        }
        if (region != null && (region.policy().spendsCredits() || Regions.isWindowRkey(packet.getRkey()))) {
            credits.grant(direct); // parked parts are credited when they are placed
            credits.borrow();
        }
        writeMessageBytes = (startsWriteMessage(packet.getOpcode()) ? 0 : writeMessageBytes) + size;
        if (notify != null) {
            if (visibleNow(psn)) {
                deliver(notify); // the common case: nothing parked before it, nothing allocated
            } else {
                deliveries.add(new Delivery(psn, notify, null, null, 0, null, false, false));
            }
        }
        if (immediate) {
            ReceiveRequest receive = immediateReceive.request();
            immediateReceive = null;
            immediateReceivePsn = -1;
            deliverWhenVisible(new Delivery(psn, null, receive, Completion.Opcode.RECV_RDMA_WITH_IMM, writeMessageBytes,
                    packet.getImmediate(), packet.getSolicited(), false));
        }
        return Result.PLACED;
    }

    /** Puts a receive a WRITE_WITH_IMM took back at the head of its queue: the write was refused. */
    private void releaseImmediateReceive() {
        if (immediateReceive != null) {
            qp.receives().restore(immediateReceive);
            immediateReceive = null;
            immediateReceivePsn = -1;
        }
    }

    /**
     * Where the WRITE message this packet belongs to ends: its first packet carries the message's length
     * (as InfiniBand's RETH carries the DMA length), which is kept for the packets after it. A packet
     * outside what was kept (or a sender that sent no length) counts as its own end.
     */
    private long writeOperationEnd(Packet packet) {
        long from = packet.getRemoteAddress();
        long packetEnd = from + packet.payloadLength();
        if (startsWriteMessage(packet.getOpcode())) {
            writeMessageFrom = from;
            writeMessageEnd = Math.max(packetEnd, from + Integer.toUnsignedLong(packet.getLength()));
        }
        return from >= writeMessageFrom && packetEnd <= writeMessageEnd ? writeMessageEnd : packetEnd;
    }

    /** Whether a WRITE packet is its message's first (FIRST, or an ONLY of any flavour). */
    private static boolean startsWriteMessage(Opcode opcode) {
        return opcode == Opcode.WRITE_FIRST || opcode == Opcode.WRITE_ONLY || opcode == Opcode.WRITE_ONLY_WITH_NOTIFY
                || opcode == Opcode.WRITE_ONLY_WITH_IMMEDIATE;
    }

    // ---- SEND ---------------------------------------------------------------------------------------------

    /**
     * Places a SEND segment: the first takes the oldest posted receive (none: NOT_READY), each lands at
     * its offset in that buffer under the buffer's policy, and the last completes the receive once
     * every part is in place.
     */
    Result send(Packet packet, Outbox out) {
        int size = packet.payloadLength();
        Opcode opcode = packet.getOpcode();
        long psn = packet.getPsn();
        boolean first = opcode == Opcode.SEND_FIRST || opcode == Opcode.SEND_ONLY || opcode == Opcode.SEND_ONLY_WITH_IMMEDIATE;
        boolean last = opcode != Opcode.SEND_FIRST && opcode != Opcode.SEND_MIDDLE;
        if (size > mtu || (!last && size != mtu)) {
            return fail(Result.INVALID, "SEND segment of " + size + " bytes: segments are " + mtu
                    + " bytes (the MTU) but the last, which may be shorter");
        }
        if (first && (receiving == null || receivingFirstPsn != psn)) {
            if (receiving != null) {
                return fail(Result.INVALID, "a new SEND began at psn " + psn + " before the one from psn " + receivingFirstPsn + " ended");
            }
            ReceiveQueue.Posted next = qp.receives().take();
            if (next == null) {
                counters.increment(qp.unreliable() ? NicCounter.UNRELIABLE_DROPPED_NO_RECEIVE : NicCounter.NO_RECEIVE_RNR_NAKS_SENT);
                return Result.NOT_READY;
            }
            receiving = next;
            receivingFirstPsn = psn;
            String foreign = protectionMismatch(next.regions());
            if (foreign != null) {
                return fail(Result.PROTECTION_ERROR, "the receive posted for the SEND from psn " + psn + ": " + foreign);
            }
        } else if (!first && receiving == null) {
            return fail(Result.INVALID, opcode + " at psn " + psn + " continues no SEND");
        }
        ReceiveRequest buffer = receiving.request();
        long offset = (psn - receivingFirstPsn) * mtu;
        if (offset + size > buffer.length()) {
            return fail(Result.LENGTH_ERROR, "length error: the SEND from psn " + receivingFirstPsn + " is longer than the " + buffer.length()
                    + "-byte receive buffer posted for it (at least " + (offset + size) + " bytes)");
        }
        List<Segment> segments = buffer.segments();
        MemoryRegion[] regions = receiving.regions();
        // What the requester says it spent, never more than a segment may (a claim of more would inflate its grant).
        int spent = (int) Math.min(Integer.toUnsignedLong(packet.getCreditsSpent()), Credits.perPacket(size, dma.pageShift()));
        if (spent == 0 && !qp.unreliable()) {
            unspentPsns.add(psn); // before the scatter: a part it parks may be placed on this thread before it returns
        }
        int direct;
        try {
            direct = scatter(receiving, offset, packet.payloadBuffer(), psn, packet.getRetransmitted(), out);
            if (direct < 0) {
                counters.increment(qp.unreliable() ? NicCounter.UNRELIABLE_DROPPED_FAULT : NicCounter.RECEIVE_BUFFER_RNR_NAKS_SENT);
                return Result.NOT_READY;
            }
        } catch (SystemBufferFullException e) {
            if (qp.unreliable()) {
                counters.increment(NicCounter.UNRELIABLE_DROPPED_FAULT);
            }
            return Result.NOT_READY;
        } catch (RegionInvalidException | BadAddressException e) {
            return fail(Result.PROTECTION_ERROR, e.getMessage());
        } catch (KernelException e) {
            return fail(Result.MEMORY_ERROR, e.getMessage());
        } finally {
            if (spent == 0 && !parkedByPsn.containsKey(psn)) {
                unspentPsns.remove(psn); // nothing of it waits to be placed
            }
        }
        countReceived(segments, regions, offset, size);
        // What the requester spent on this segment and did not park comes back now, the rest when placed.
        // (A scatter list of many small elements may park more parts than a packet is charged; the pair's
        // own limit on parked parts still holds, so nothing is granted below zero.)
        int parked = scatteredPages - direct;
        if (spent > 0 || parked > 0) {
            credits.grant(Math.max(0, spent - parked));
            credits.borrow();
        }
        if (last) {
            boolean immediate = opcode == Opcode.SEND_LAST_WITH_IMMEDIATE || opcode == Opcode.SEND_ONLY_WITH_IMMEDIATE;
            int invalidate = packet.getInvalidateRkey();
            if (invalidate != 0) {
                // InfiniBand's IETH: the sender's SEND_WITH_INV invalidates one of this endpoint's type 2 windows.
                MemoryWindow window = qp.endpoint().window(Integer.toUnsignedLong(invalidate));
                try {
                    if (window == null) {
                        throw new NicException(String.format("rkey 0x%x names no memory window of %s", invalidate, qp.endpoint()));
                    }
                    window.invalidate(Integer.toUnsignedLong(invalidate));
                } catch (NicException e) {
                    return fail(Result.INVALIDATE_ERROR, "SEND_WITH_INVALIDATE: " + e.getMessage());
                }
            }
            receiving = null;
            Integer extra = immediate ? Integer.valueOf(packet.getImmediate()) : invalidate != 0 ? Integer.valueOf(invalidate) : null;
            deliverWhenVisible(new Delivery(psn, null, buffer, Completion.Opcode.RECV, offset + size, extra, packet.getSolicited(),
                    invalidate != 0));
        }
        return Result.PLACED;
    }

    /** Pages the last {@link #scatter} touched, parked or not. */
    private int scatteredPages;

    /**
     * Writes {@code payload} (its bytes from position to limit) at {@code offset} of a posted receive, into
     * the scatter elements it falls in, in order (most receives have one), each under its region's policy.
     *
     * @return parts written directly (the rest parked), or -1 when a policy says the receiver is not ready
     */
    private int scatter(ReceiveQueue.Posted posted, long offset, ByteBuffer payload, long psn, boolean again, Outbox out) {
        List<Segment> segments = posted.request().segments();
        MemoryRegion[] regions = posted.regions();
        int direct = 0;
        scatteredPages = 0;
        long start = 0;
        int from = 0;
        int base = payload.position();
        int size = payload.remaining();
        int limit = payload.limit();
        for (int i = 0; i < segments.size() && from < size; i++) {
            Segment e = segments.get(i);
            long end = start + e.length();
            long at = offset + from;
            if (at < end) {
                int take = (int) Math.min(end - at, size - from);
                long va = e.address() + (at - start);
                payload.limit(base + from + take).position(base + from);
                int placed;
                try {
                    placed = place(regions[i], va, e.address() + e.length(), payload, psn, Side.RECEIVE_BUFFER, again, out);
                } finally {
                    payload.limit(limit);
                }
                if (placed < 0) {
                    return -1;
                }
                direct += placed;
                scatteredPages += DmaEngine.pagesSpanned(va, take, dma.pageShift());
                from += take;
            }
            start = end;
        }
        return direct;
    }

    // ---- UD -----------------------------------------------------------------------------------------------

    /** The order UD datagrams arrived in: they come from many senders, so their own PSNs cannot order what they park. */
    private long datagramSequence;

    /**
     * Places a UD datagram (one packet, at most an MTU) in the oldest posted receive: its first 40
     * bytes get the GRH, the payload follows. No receive, a page that is not resident (ON_DEMAND) or a
     * full share of the system buffer (SHADOW) drops it, counted, and the receive stays posted; a receive
     * too small for GRH and payload completes with a length error, as rxe's responder does.
     */
    void datagram(Datagram source, Packet packet, Outbox out) {
        ReceiveQueue.Posted posted = qp.receives().take();
        if (posted == null) {
            counters.increment(NicCounter.UNRELIABLE_DROPPED_NO_RECEIVE);
            return;
        }
        ReceiveRequest buffer = posted.request();
        String foreign = protectionMismatch(posted.regions());
        if (foreign != null) {
            completions.completeReceive(buffer, Completion.Opcode.RECV, CompletionStatus.LOCAL_PROTECTION_ERROR, 0, foreign, false, 0, false);
            return;
        }
        int size = packet.payloadLength();
        long bytes = (long) Datagram.GRH_BYTES + size;
        if (bytes > buffer.length()) {
            completions.completeReceive(buffer, Completion.Opcode.RECV, CompletionStatus.LOCAL_LENGTH_ERROR, 0, "length error: a datagram of "
                    + size + " bytes and its 40-byte GRH do not fit the " + buffer.length() + "-byte receive buffer", false, 0, false);
            return;
        }
        long sequence = datagramSequence++;
        int direct;
        try {
            direct = scatter(posted, 0, withGrh(source, packet), sequence, false, out);
        } catch (SystemBufferFullException e) {
            direct = -1;
        } catch (RegionInvalidException | BadAddressException e) {
            completions.completeReceive(buffer, Completion.Opcode.RECV, CompletionStatus.LOCAL_PROTECTION_ERROR, 0, e.getMessage(), false, 0, false);
            return;
        } catch (KernelException e) {
            completions.completeReceive(buffer, Completion.Opcode.RECV, CompletionStatus.LOCAL_MEMORY_ERROR, 0, e.getMessage(), false, 0, false);
            return;
        }
        if (direct < 0) {
            qp.receives().restore(posted);
            counters.increment(NicCounter.UNRELIABLE_DROPPED_FAULT);
            return;
        }
        countReceived(buffer.segments(), posted.regions(), 0, (int) bytes);
        credits.borrow();
        boolean immediate = packet.getOpcode() == Opcode.SEND_ONLY_WITH_IMMEDIATE;
        deliverWhenVisible(new Delivery(sequence, null, buffer, Completion.Opcode.RECV, bytes, immediate ? Integer.valueOf(packet.getImmediate())
                : null, packet.getSolicited(), false, source));
    }

    /**
     * The Global Route Header InfiniBand puts in a UD receive's first 40 bytes, network order: IP
     * version 6, the payload length, next header 0x1B (IBA transport), hop limit, then the source's
     * and this node's port GIDs; the datagram's payload follows it in the buffer returned.
     */
    private ByteBuffer withGrh(Datagram source, Packet packet) {
        byte[] grh = new byte[Datagram.GRH_BYTES + packet.payloadLength()];
        grh[0] = 0x60;
        int payloadLength = packet.payloadLength() + GRH_TRANSPORT_HEADERS;
        grh[4] = (byte) (payloadLength >>> 8);
        grh[5] = (byte) payloadLength;
        grh[6] = 0x1B;
        grh[7] = (byte) 0xFF;
        Lids.gid(source.node(), grh, 8);
        Lids.gid(nic.nodeId(), grh, 24);
        System.arraycopy(packet.payloadArray(), packet.payloadOffset(), grh, Datagram.GRH_BYTES, packet.payloadLength());
        return ByteBuffer.wrap(grh);
    }

    /** What a UD packet carries after the GRH besides its payload: BTH (12), DETH (8), and the ICRC (4). */
    private static final int GRH_TRANSPORT_HEADERS = 24;

    /** Counts [offset, offset + length) of a receive's message as received into the regions it lies in. */
    private static void countReceived(List<Segment> segments, MemoryRegion[] regions, long offset, int length) {
        long start = 0;
        for (int i = 0; i < segments.size() && length > 0; i++) {
            long end = start + segments.get(i).length();
            if (offset < end) {
                int take = (int) Math.min(end - offset, length);
                regions[i].counters().received(take);
                offset += take;
                length -= take;
            }
            start = end;
        }
    }

    /** The receive being filled cannot take this message: it completes with {@code status} (a local length or protection error). */
    void failReceive(CompletionStatus status, String reason) {
        if (receiving != null) {
            ReceiveRequest buffer = receiving.request();
            receiving = null;
            completions.completeReceive(buffer, Completion.Opcode.RECV, status, 0, reason, false, 0, false);
        }
    }

    /** The queue pair failed or closed: the receive a message was landing in completes as flushed. */
    void abandon(String reason) {
        failReceive(CompletionStatus.FLUSHED, reason);
        if (immediateReceive != null) {
            ReceiveRequest buffer = immediateReceive.request();
            immediateReceive = null;
            immediateReceivePsn = -1;
            completions.completeReceive(buffer, Completion.Opcode.RECV_RDMA_WITH_IMM, CompletionStatus.FLUSHED, 0, reason, false, 0, false);
        }
    }

    /**
     * UC dropped the message in progress: the receive it was landing in (a SEND's, a WRITE_WITH_IMM's)
     * goes back to the head of its queue for the next message, as an unreliable responder reuses it.
     */
    void dropMessage() {
        if (receiving != null) {
            qp.receives().restore(receiving);
            receiving = null;
        }
        releaseImmediateReceive();
    }

    /** The pair was reset: the receives a message was landing in are dropped without completions, as RESET drops them. */
    void discard() {
        receiving = null;
        immediateReceive = null;
        immediateReceivePsn = -1;
    }

    /** Why the pair may not receive into one of these regions (another protection domain), or null. */
    private String protectionMismatch(MemoryRegion[] regions) {
        for (MemoryRegion region : regions) {
            String why = region == null ? null : region.protectionMismatch(qp.protectionDomain());
            if (why != null) {
                return why;
            }
        }
        return null;
    }

    private Result fail(Result result, String why) {
        error = why;
        return result;
    }

    // ---- pages ---------------------------------------------------------------------------------------------

    /**
     * Writes a received payload at [va, va + size) of a region page by page; a page that is missing is
     * left to the region's policy.
     *
     * @return how many parts were written directly (the rest were parked), or -1 when the policy says
     *         the receiver is not ready (nothing after the missing page was written)
     */
    private int place(MemoryRegion region, long va, long operationEnd, ByteBuffer src, long psn, Side side, boolean again, Outbox out) {
        RegionPolicy policy = region.policy();
        AddressSpace space = region.endpoint().space();
        int pageSize = dma.pageSize();
        int length = src.remaining();
        int direct = 0;
        RegionPolicy.Parking parking = null;
        while (src.hasRemaining()) {
            long at = va + (length - src.remaining());
            int offset = (int) (at & (pageSize - 1));
            int chunk = Math.min(pageSize - offset, src.remaining());
            long vpn = at >>> dma.pageShift();
            long t = policy.queuedBehind(space, vpn) ? RegionPolicy.NOT_RESIDENT : dma.acquire(region, vpn, true, side, again, out::flush);
            int limit = src.limit();
            src.limit(src.position() + chunk);
            try {
                if (t != RegionPolicy.NOT_RESIDENT) {
                    try {
                        dma.memory().write(Tlb.frameOf(t), offset, src);
                    } finally {
                        dma.release(t, true);
                    }
                    direct++;
                } else {
                    if (parking == null) {
                        parking = (s, address, part) -> park(s, address, part, psn);
                    }
                    if (policy.missing(region, vpn, at, operationEnd, src, side, parking) == RegionPolicy.Verdict.NOT_READY) {
                        faulted = true;
                        return -1;
                    }
                }
            } finally {
                src.limit(limit);
            }
        }
        if (direct > 0) {
            region.endpoint().placed(va, length);
        }
        return direct;
    }

    private void park(AddressSpace space, long address, ByteBuffer part, long psn) {
        if (!credits.mayPark(qp.parkedPartsHeld())) {
            // More than this node granted: a sender that ignores its credits (or claimed more than it was
            // given) waits with RNR NAKs instead of taking other queue pairs' share of the buffer.
            throw new SystemBufferFullException("queue pair " + qp.qpn() + " already has its " + credits.held()
                    + " granted parts parked; its sender overran its credits");
        }
        // Recorded first: the completion may run at once on this thread if the page is already coming in.
        parkedByPsn.merge(psn, 1, Integer::sum);
        qp.parkStarted();
        try {
            long parkedAt = nic.clock().nanoTime();
            nic.kernel().systemBuffer().park(space, address, part, failure -> {
                nic.observers().waited(WaitCause.SYSTEM_BUFFER, nic.clock().nanoTime() - parkedAt);
                qp.onParkedPartDone(psn, failure);
            });
        } catch (RuntimeException e) {
            parkedByPsn.merge(psn, -1, (a, b) -> a + b == 0 ? null : a + b);
            qp.parkAbandoned();
            throw e;
        }
    }

    /**
     * A parked part is in place (or was dropped with its memory): it is credited, and what waited for it
     * becomes visible.
     *
     * @return false for a part this placement does not know
     */
    boolean parkedPartDone(long psn) {
        Integer left = parkedByPsn.get(psn);
        if (left == null) {
            return false;
        }
        if (left == 1) {
            parkedByPsn.remove(psn);
        } else {
            parkedByPsn.put(psn, left - 1);
        }
        if (!unspentPsns.contains(psn)) {
            credits.grant(1);
        } else if (left == 1) {
            unspentPsns.remove(psn);
        }
        while (!deliveries.isEmpty() && lowestParkedPsn() > deliveries.peek().psn()) {
            deliver(deliveries.poll());
        }
        return true;
    }

    /** The lowest PSN with data still parked, or {@link Long#MAX_VALUE}: nothing at or after it may be acknowledged or read yet. */
    long lowestParkedPsn() {
        return parkedByPsn.isEmpty() ? Long.MAX_VALUE : parkedByPsn.firstKey();
    }

    // ---- what data makes visible -----------------------------------------------------------------------

    /** Delivers at once unless parked data before it (or an earlier delivery) still waits. */
    private void deliverWhenVisible(Delivery delivery) {
        if (visibleNow(delivery.psn())) {
            deliver(delivery);
        } else {
            deliveries.add(delivery);
        }
    }

    /** Whether what a packet at {@code psn} makes visible may be delivered now: no parked data and no delivery before it waits. */
    private boolean visibleNow(long psn) {
        return deliveries.isEmpty() && lowestParkedPsn() > psn;
    }

    private void deliver(EventCounter counter) {
        counter.getAndAdd(1);
        counters.increment(NicCounter.NOTIFICATIONS_DELIVERED);
    }

    private void deliver(Delivery delivery) {
        if (delivery.counter() != null) {
            deliver(delivery.counter());
        } else {
            Integer immediate = delivery.immediate();
            completions.completeReceive(delivery.receive(), delivery.opcode(), CompletionStatus.SUCCESS, delivery.bytes(), null,
                    immediate != null && !delivery.invalidated(), immediate == null ? 0 : immediate, delivery.solicited(), delivery.invalidated(),
                    delivery.source());
        }
    }

    /** The placement state, for diagnostics. */
    String describe() {
        return String.format("parked psns=%d deliveriesWaiting=%d receivesPosted=%d%s%s", parkedByPsn.size(), deliveries.size(),
                qp.receives().size(), receiving == null ? "" : " receiving wr " + receiving.request().wrId() + " from psn " + receivingFirstPsn,
                immediateReceive == null ? "" : " holding wr " + immediateReceive.request().wrId() + " for psn " + immediateReceivePsn);
    }

    /**
     * What becomes visible once a message's data is in place: an event counter's increment, or a
     * posted receive's completion (with its byte count and, when the sender gave them, immediate data (or
     * the rkey a SEND_WITH_INVALIDATE invalidated) and the solicited-event bit).
     */
    private record Delivery(long psn, EventCounter counter, ReceiveRequest receive, Completion.Opcode opcode, long bytes,
            Integer immediate, boolean solicited, boolean invalidated, Datagram source) {
        Delivery(long psn, EventCounter counter, ReceiveRequest receive, Completion.Opcode opcode, long bytes, Integer immediate,
                boolean solicited, boolean invalidated) {
            this(psn, counter, receive, opcode, bytes, immediate, solicited, invalidated, null);
        }
    }
}
