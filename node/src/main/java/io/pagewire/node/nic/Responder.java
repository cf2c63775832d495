package io.pagewire.node.nic;

import com.google.protobuf.ByteString;
import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.BadAddressException;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.SystemBufferFullException;
import io.pagewire.proto.fabric.Opcode;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.Syndrome;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.TreeMap;

/**
 * The receiving half of a queue pair (the responder of InfiniBand RC). It executes requests strictly
 * in PSN order: packets that arrive ahead of a gap wait in a reorder window, duplicates are answered
 * again rather than executed again, and a gap that persists is NAKed.
 *
 * <p>What a receive into a non-resident page does is the destination region's
 * {@link ReceiveFaultPolicy}: PINNED never meets one, PIN_ON_MISS stalls while the kernel pins the
 * page, ON_DEMAND raises a fault and answers RNR NAK, SHADOW parks the data in the system buffer. Parked data is acknowledged, credited
 * and followed by its notifications only once it is in place, so a completion or a notification is
 * never seen before its data, and notifications stay in order (the sequence window). Guarded by the
 * queue pair's lock.
 */
final class Responder {
    private static final int NAK_AFTER_PACKETS_AHEAD = 3;

    private final QueuePair qp;
    private final Nic nic;
    private final NicContext ctx;
    private final NicCounters counters;
    private final DmaEngine dma;
    private final int mtu;
    private final Packet[] held;
    private final long[] notResident = new long[1];

    /** The next PSN to execute. */
    private long expectedPsn;
    private long nakSentFor = -1;
    private long rnrNakedFor = -1;
    /** Credits granted so far, in all. */
    private long creditLimit;
    private long ackSentPsn = Long.MIN_VALUE;
    private long ackSentCredit;
    private boolean ackDue;
    /** Parked parts not yet in place, by PSN. */
    private final TreeMap<Long, Integer> parkedByPsn = new TreeMap<>();
    /** Notifications and receive completions waiting for parked data before them, in PSN order. */
    private final ArrayDeque<Delivery> notifications = new ArrayDeque<>();
    /** The posted receive the SEND in progress lands in, and the PSN that SEND began at. */
    private ReceiveQueue.Posted receiving;
    private long receivingFirstPsn;
    /** Bytes of the WRITE in progress so far (a WRITE_WITH_IMM's receive completion reports its length). */
    private long writeMessageBytes;
    /** The address range [from, end) of the WRITE message being received, as its first packet gave it. */
    private long writeMessageFrom;
    private long writeMessageEnd;
    /** A READ or atomic that must wait for parked writes before it. */
    private Packet deferred;
    /** Set by an execution that stopped the queue (RNR, deferral, refusal). */
    private boolean stalled;
    private final long[] atomicPsn;
    private final long[] atomicResult;

    Responder(QueuePair qp) {
        this.qp = qp;
        this.nic = qp.nic();
        this.ctx = nic.context();
        this.counters = nic.counters();
        this.dma = nic.dma();
        this.mtu = ctx.mtuBytes();
        this.held = new Packet[ctx.reorderWindowPackets()];
        this.creditLimit = qp.firstCredits();
        this.atomicPsn = new long[ctx.sendWindowPackets()];
        this.atomicResult = new long[ctx.sendWindowPackets()];
        java.util.Arrays.fill(atomicPsn, -1);
    }

    void onRequest(Packet packet, Outbox out) {
        long psn = packet.getPsn();
        if (psn < 0) {
            // 2^63 and above: no requester numbers that far; a corrupt or forged packet.
            counters.increment(NicCounter.DROPPED_PACKETS);
            return;
        }
        if (psn < expectedPsn) {
            duplicate(packet, out);
            return;
        }
        long ahead = psn - expectedPsn;
        if (ahead >= held.length) {
            counters.increment(NicCounter.DROPPED_PACKETS);
            return;
        }
        if (ahead > 0 || deferred != null) {
            hold(packet);
            if (ahead >= NAK_AFTER_PACKETS_AHEAD && deferred == null && nakSentFor != expectedPsn && rnrNakedFor != expectedPsn) {
                nakSentFor = expectedPsn;
                counters.increment(NicCounter.SEQUENCE_NAKS_SENT);
                out.add(acknowledgement(Syndrome.NAK_SEQUENCE_ERROR, expectedPsn));
            }
            return;
        }
        run(packet, out);
    }

    /** Executes a packet at the expected PSN, then every held packet that follows it. */
    private void run(Packet packet, Outbox out) {
        while (packet != null) {
            long consumed = execute(packet, out);
            expectedPsn += consumed;
            if (consumed > 0) {
                ackDue = true;
            }
            if (stalled) {
                stalled = false;
                return;
            }
            packet = takeHeld(expectedPsn);
        }
    }

    private long execute(Packet packet, Outbox out) {
        return switch (packet.getOpcode()) {
            case WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY, WRITE_LAST_WITH_NOTIFY, WRITE_ONLY_WITH_NOTIFY,
                    WRITE_LAST_WITH_IMMEDIATE, WRITE_ONLY_WITH_IMMEDIATE -> executeWrite(packet, out);
            case SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_ONLY, SEND_LAST_WITH_IMMEDIATE, SEND_ONLY_WITH_IMMEDIATE -> executeSend(packet, out);
            case READ_REQUEST -> executeRead(packet, out, false);
            case FETCH_ADD, COMPARE_SWAP -> executeAtomic(packet, out);
            default -> refuse(packet, Syndrome.NAK_INVALID_REQUEST, "opcode " + packet.getOpcode() + " is not a request", out);
        };
    }

    // ---- WRITE ------------------------------------------------------------------------------------

    private long executeWrite(Packet packet, Outbox out) {
        ByteString payload = packet.getPayload();
        if (payload.size() > mtu) {
            return refuse(packet, Syndrome.NAK_INVALID_REQUEST, "payload of " + payload.size() + " bytes exceeds the MTU of " + mtu, out);
        }
        MemoryRegion region = accessible(packet, Access.REMOTE_WRITE, payload.size(), out);
        if (region == null) {
            return 1;
        }
        boolean notify = packet.getOpcode() == Opcode.WRITE_LAST_WITH_NOTIFY || packet.getOpcode() == Opcode.WRITE_ONLY_WITH_NOTIFY;
        EventCounter counter = null;
        if (notify) {
            counter = qp.endpoint().eventCounter(packet.getCounterId());
            if (counter == null || !counter.allows(Access.REMOTE_WRITE)) {
                return refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, "event counter " + packet.getCounterId() + " on "
                        + qp.endpoint() + (counter == null ? " does not exist" : " does not allow notifications (REMOTE_WRITE)"), out);
            }
        }
        boolean immediate = packet.getOpcode() == Opcode.WRITE_LAST_WITH_IMMEDIATE || packet.getOpcode() == Opcode.WRITE_ONLY_WITH_IMMEDIATE;
        long psn = packet.getPsn();
        if (immediate && qp.receives().size() == 0) {
            // The immediate data needs a posted receive to complete; the data waits with it (ibverbs' RNR).
            counters.increment(NicCounter.NO_RECEIVE_RNR_NAKS_SENT);
            return receiverNotReady(psn, out);
        }
        ReceiveFaultPolicy policy = nic.receivePolicy(region.mode());
        int direct;
        try {
            direct = place(region, policy, packet.getRemoteAddress(), writeOperationEnd(packet), payload, psn, Side.RECEIVE,
                    packet.getRetransmitted(), out);
        } catch (SystemBufferFullException e) {
            return receiverNotReady(psn, out);
        } catch (RegionInvalidException | BadAddressException e) {
            return refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, e.getMessage(), out);
        } catch (KernelException e) {
            return refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, e.getMessage(), out);
        }
        if (direct < 0) {
            return receiverNotReady(psn, out);
        }
        region.counters().received(payload.size());
        if (policy.spendsCredits()) {
            creditLimit += direct + qp.borrowCredits(); // parked parts are credited when they are placed
        }
        writeMessageBytes = (startsWriteMessage(packet.getOpcode()) ? 0 : writeMessageBytes) + payload.size();
        if (notify) {
            if (visibleNow(psn)) {
                deliver(counter); // the common case: nothing parked before it, nothing allocated
            } else {
                notifications.add(new Delivery(psn, counter, null, null, 0, null));
            }
        }
        if (immediate) {
            ReceiveQueue.Posted receive = qp.receives().take();
            deliverWhenVisible(new Delivery(psn, null, receive.request(), Completion.Opcode.RECV_RDMA_WITH_IMM, writeMessageBytes,
                    packet.getImmediate()));
        }
        return 1;
    }

    /**
     * Where the WRITE message this packet belongs to ends: its first packet carries the message's length
     * (as InfiniBand's RETH carries the DMA length), which the responder keeps for the packets after it.
     * A packet outside what was kept (or a sender that sent no length) counts as its own end.
     */
    private long writeOperationEnd(Packet packet) {
        long from = packet.getRemoteAddress();
        long packetEnd = from + packet.getPayload().size();
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

    // ---- SEND ---------------------------------------------------------------------------------------

    /**
     * A SEND segment: the first takes the oldest posted receive (or answers RNR NAK when there is none),
     * each lands at its offset in that buffer under the buffer's receive-fault policy, and the last
     * completes the receive once every part is in place.
     */
    private long executeSend(Packet packet, Outbox out) {
        ByteString payload = packet.getPayload();
        Opcode opcode = packet.getOpcode();
        long psn = packet.getPsn();
        boolean first = opcode == Opcode.SEND_FIRST || opcode == Opcode.SEND_ONLY || opcode == Opcode.SEND_ONLY_WITH_IMMEDIATE;
        boolean last = opcode != Opcode.SEND_FIRST && opcode != Opcode.SEND_MIDDLE;
        if (payload.size() > mtu || (!last && payload.size() != mtu)) {
            return refuse(packet, Syndrome.NAK_INVALID_REQUEST, "SEND segment of " + payload.size() + " bytes: segments are "
                    + mtu + " bytes (the MTU) but the last, which may be shorter", out);
        }
        if (first && (receiving == null || receivingFirstPsn != psn)) {
            if (receiving != null) {
                return refuse(packet, Syndrome.NAK_INVALID_REQUEST, "a new SEND began at psn " + psn + " before the one from psn "
                        + receivingFirstPsn + " ended", out);
            }
            ReceiveQueue.Posted next = qp.receives().take();
            if (next == null) {
                counters.increment(NicCounter.NO_RECEIVE_RNR_NAKS_SENT);
                return receiverNotReady(psn, out);
            }
            receiving = next;
            receivingFirstPsn = psn;
        } else if (!first && receiving == null) {
            return refuse(packet, Syndrome.NAK_INVALID_REQUEST, opcode + " at psn " + psn + " continues no SEND", out);
        }
        ReceiveRequest buffer = receiving.request();
        long offset = (psn - receivingFirstPsn) * mtu;
        if (offset + payload.size() > buffer.length()) {
            String error = "length error: the SEND from psn " + receivingFirstPsn + " is longer than the " + buffer.length()
                    + "-byte receive buffer posted for it (at least " + (offset + payload.size()) + " bytes)";
            return failReceive(packet, CompletionStatus.LOCAL_LENGTH_ERROR, Syndrome.NAK_INVALID_REQUEST, error, out);
        }
        MemoryRegion region = receiving.region();
        ReceiveFaultPolicy policy = nic.receivePolicy(region.mode());
        int direct;
        try {
            direct = place(region, policy, buffer.address() + offset, buffer.address() + buffer.length(), payload, psn, Side.RECEIVE_BUFFER,
                    packet.getRetransmitted(), out);
        } catch (SystemBufferFullException e) {
            return receiverNotReady(psn, out);
        } catch (RegionInvalidException | BadAddressException e) {
            return failReceive(packet, CompletionStatus.LOCAL_PROTECTION_ERROR, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, e.getMessage(), out);
        } catch (KernelException e) {
            return failReceive(packet, CompletionStatus.LOCAL_MEMORY_ERROR, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, e.getMessage(), out);
        }
        if (direct < 0) {
            counters.increment(NicCounter.RECEIVE_BUFFER_RNR_NAKS_SENT);
            return receiverNotReady(psn, out);
        }
        region.counters().received(payload.size());
        // The requester spent sendCredits for this segment; what it did not park comes back now, the rest when placed.
        int parked = DmaEngine.pagesSpanned(buffer.address() + offset, payload.size(), dma.pageShift()) - direct;
        creditLimit += Requester.sendCredits(payload.size(), dma.pageShift()) - parked + qp.borrowCredits();
        if (last) {
            boolean immediate = opcode == Opcode.SEND_LAST_WITH_IMMEDIATE || opcode == Opcode.SEND_ONLY_WITH_IMMEDIATE;
            receiving = null;
            deliverWhenVisible(new Delivery(psn, null, buffer, Completion.Opcode.RECV, offset + payload.size(),
                    immediate ? packet.getImmediate() : null));
        }
        return 1;
    }

    /** The queue pair failed or closed: the receive a SEND was landing in completes as flushed. */
    void abandonMessage(String reason) {
        if (receiving != null) {
            ReceiveRequest buffer = receiving.request();
            receiving = null;
            qp.completeReceive(buffer, Completion.Opcode.RECV, CompletionStatus.FLUSHED, 0, reason, false, 0);
        }
    }

    /**
     * The receive being filled cannot take this message: it completes with {@code status}, the sender's
     * request is refused, and the queue pair moves to ERROR, flushing what else was posted (as an RC
     * responder does after a local length or protection error).
     */
    private long failReceive(Packet packet, CompletionStatus status, Syndrome syndrome, String error, Outbox out) {
        ReceiveRequest buffer = receiving.request();
        receiving = null;
        qp.completeReceive(buffer, Completion.Opcode.RECV, status, 0, error, false, 0);
        long consumed = refuse(packet, syndrome, error, out);
        qp.fail(null, CompletionStatus.FLUSHED, "receive " + buffer.wrId() + " failed: " + error);
        return consumed;
    }

    /**
     * Writes a received payload at [va, va + size) of a region page by page; a page that is missing is
     * left to the region's receive-fault policy.
     *
     * @return how many parts were written directly (the rest were parked), or -1 when the policy says
     *         the receiver is not ready (nothing after the missing page was written)
     */
    private int place(MemoryRegion region, ReceiveFaultPolicy policy, long va, long operationEnd, ByteString payload, long psn, Side side,
            boolean again, Outbox out) {
        AddressSpace space = region.endpoint().space();
        ByteBuffer src = payload.asReadOnlyByteBuffer();
        int pageSize = dma.pageSize();
        int length = src.remaining();
        int direct = 0;
        ReceiveFaultPolicy.Parking parking = null;
        while (src.hasRemaining()) {
            long at = va + (length - src.remaining());
            int offset = (int) (at & (pageSize - 1));
            int chunk = Math.min(pageSize - offset, src.remaining());
            long vpn = at >>> dma.pageShift();
            long t = policy.queuedBehind(space, vpn) ? Translator.NOT_RESIDENT : dma.acquire(region, vpn, true, side, again, out::flush);
            int limit = src.limit();
            src.limit(src.position() + chunk);
            try {
                if (t != Translator.NOT_RESIDENT) {
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
                    if (policy.missing(region, vpn, at, operationEnd, src, side, parking) == ReceiveFaultPolicy.Verdict.NOT_READY) {
                        return -1;
                    }
                }
            } finally {
                src.limit(limit);
            }
        }
        return direct;
    }

    private void park(AddressSpace space, long address, ByteBuffer part, long psn) {
        if (qp.parkedPartsHeld() >= qp.creditsHeld()) {
            // More than this node granted: a sender that ignores its credits (or claimed more than it was
            // given) waits with RNR NAKs instead of taking other queue pairs' share of the buffer.
            throw new SystemBufferFullException("queue pair " + qp.qpn() + " already has its " + qp.creditsHeld()
                    + " granted parts parked; its sender overran its credits");
        }
        // Recorded first: the completion may run at once on this thread if the page is already coming in.
        parkedByPsn.merge(psn, 1, Integer::sum);
        qp.parkStarted();
        try {
            long parkedAt = nic.clock().nanoTime();
            nic.kernel().systemBuffer().park(space, address, part, failure -> {
                nic.waited(WaitCause.SYSTEM_BUFFER, nic.clock().nanoTime() - parkedAt);
                qp.onParkedPartDone(psn, failure);
            });
        } catch (RuntimeException e) {
            parkedByPsn.merge(psn, -1, (a, b) -> a + b == 0 ? null : a + b);
            qp.parkAbandoned();
            throw e;
        }
    }

    /** A parked part is in place (or was dropped with its memory): credit it, release what waited for it. */
    void parkedPartDone(long psn, Throwable failure, Outbox out) {
        Integer left = parkedByPsn.get(psn);
        if (left == null) {
            return;
        }
        if (left == 1) {
            parkedByPsn.remove(psn);
        } else {
            parkedByPsn.put(psn, left - 1);
        }
        creditLimit++;
        ackDue = true;
        if (failure != null) {
            counters.increment(NicCounter.REMOTE_ACCESS_NAKS_SENT);
            out.add(acknowledgement(Syndrome.NAK_REMOTE_ACCESS_ERROR, psn)
                    .setError("the write's destination memory was freed before its parked data could be placed: " + failure.getMessage()));
        }
        deliverNotifications();
        if (deferred != null && lowestParkedPsn() > deferred.getPsn()) {
            Packet waiting = deferred;
            deferred = null;
            run(waiting, out);
        }
    }

    private long lowestParkedPsn() {
        return parkedByPsn.isEmpty() ? Long.MAX_VALUE : parkedByPsn.firstKey();
    }

    /** Delivers at once unless parked data before it (or an earlier delivery) still waits. */
    private void deliverWhenVisible(Delivery delivery) {
        if (visibleNow(delivery.psn())) {
            deliver(delivery);
        } else {
            notifications.add(delivery);
        }
    }

    /** Whether what a packet at {@code psn} makes visible may be delivered now: no parked data and no delivery before it waits. */
    private boolean visibleNow(long psn) {
        return notifications.isEmpty() && lowestParkedPsn() > psn;
    }

    private void deliver(EventCounter counter) {
        counter.getAndAdd(1);
        counters.increment(NicCounter.NOTIFICATIONS_DELIVERED);
    }

    private void deliverNotifications() {
        while (!notifications.isEmpty() && lowestParkedPsn() > notifications.peek().psn()) {
            deliver(notifications.poll());
        }
    }

    private void deliver(Delivery delivery) {
        if (delivery.counter() != null) {
            deliver(delivery.counter());
        } else {
            Integer immediate = delivery.immediate();
            qp.completeReceive(delivery.receive(), delivery.opcode(), CompletionStatus.SUCCESS, delivery.bytes(), null,
                    immediate != null, immediate == null ? 0 : immediate);
        }
    }

    // ---- READ and FETCH_ADD -------------------------------------------------------------------------

    private long executeRead(Packet packet, Outbox out, boolean again) {
        long psn = packet.getPsn();
        if (lowestParkedPsn() < psn) {
            // A READ sees every write before it: wait for the parked ones.
            if (!again) {
                defer(packet);
            }
            return 0;
        }
        int length = packet.getLength();
        int responses = Math.max(1, (length + mtu - 1) / mtu);
        if (again && psn + responses > expectedPsn) {
            // A repeated READ is answered only up to what was executed: the rest of its PSNs are
            // still to come as requests of their own, and answering them now would let the
            // requester stop asking for a PSN this side has not reached.
            responses = (int) (expectedPsn - psn);
            length = Math.min(length, responses * mtu);
        }
        if (length < 0 || responses > ctx.sendWindowPackets()) {
            return again ? 0 : refuse(packet, Syndrome.NAK_INVALID_REQUEST, "READ of " + length + " bytes asks for more than "
                    + ctx.sendWindowPackets() + " responses", out);
        }
        MemoryRegion region = accessible(packet, Access.REMOTE_READ, length, out);
        if (region == null) {
            return again ? 0 : 1;
        }
        // Responses to a READ asked before are sent again: counted apart, and marked so for the requester.
        boolean resent = again || packet.getRetransmitted();
        for (int i = 0; i < responses; i++) {
            long offset = (long) i * mtu;
            int size = (int) Math.min(mtu, length - offset);
            ByteString payload;
            try {
                payload = dma.gather(region, packet.getRemoteAddress() + offset, size, Side.READ_SOURCE, resent, out, notResident);
            } catch (RegionInvalidException | BadAddressException e) {
                return again ? 0 : refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, e.getMessage(), out) + i;
            } catch (KernelException e) {
                return again ? 0 : refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, e.getMessage(), out) + i;
            }
            if (payload == null) {
                // The source page is out: fault it in; the requester asks again from this response. A fault
                // that already failed for good ends the READ instead of answering RNR NAK for ever.
                String failed = nic.responderFaults().takeFailure(region.endpoint().space(), notResident[0]);
                if (failed != null) {
                    return again ? 0 : refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, "a page fault on the READ's source failed: "
                            + failed, out) + i;
                }
                nic.responderFaults().raise(region, notResident[0], false, Side.READ_SOURCE);
                out.flush();
                if (again) {
                    return 0;
                }
                receiverNotReady(psn + i, out);
                return i;
            }
            if (!resent) {
                region.counters().sent(size);
            }
            out.add(qp.packet(Opcode.READ_RESPONSE, psn + i).setPayload(payload).setRetransmitted(resent));
            if (out.size() >= ctx.batchPackets()) {
                out.flush();
            }
        }
        return responses;
    }

    /**
     * FETCH_ADD on an event counter, or FETCH_ADD and COMPARE_SWAP on an 8-byte word of registered
     * memory. It waits for parked writes before it, runs once (a duplicate is answered from the replay
     * cache), and a target page that is not resident is faulted in while the requester is told RNR, as
     * for a READ's source.
     */
    private long executeAtomic(Packet packet, Outbox out) {
        long psn = packet.getPsn();
        if (lowestParkedPsn() < psn) {
            defer(packet);
            return 0;
        }
        long previous;
        if (packet.getRkey() == 0 && packet.getOpcode() == Opcode.FETCH_ADD) {
            EventCounter counter = qp.endpoint().eventCounter(packet.getCounterId());
            if (counter == null || !counter.allows(Access.REMOTE_ATOMIC)) {
                return refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, "event counter " + packet.getCounterId() + " on " + qp.endpoint()
                        + (counter == null ? " does not exist" : " does not allow FETCH_ADD (REMOTE_ATOMIC)"), out);
            }
            previous = counter.getAndAdd(packet.getAdd());
        } else {
            long address = packet.getRemoteAddress();
            if ((address & 7) != 0) {
                return refuse(packet, Syndrome.NAK_INVALID_REQUEST, String.format("%s at 0x%x: atomics need an 8-byte aligned address",
                        packet.getOpcode(), address), out);
            }
            MemoryRegion region = accessible(packet, Access.REMOTE_ATOMIC, 8, out);
            if (region == null) {
                return 1;
            }
            long vpn = address >>> dma.pageShift();
            int offset = (int) (address & (dma.pageSize() - 1));
            long t;
            try {
                t = dma.acquire(region, vpn, true, Side.ATOMIC_TARGET, packet.getRetransmitted(), out::flush);
                if (t == Translator.NOT_RESIDENT) {
                    String failed = nic.responderFaults().takeFailure(region.endpoint().space(), vpn);
                    if (failed != null) {
                        return refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, "a page fault on the atomic's target failed: " + failed, out);
                    }
                    nic.responderFaults().raise(region, vpn, true, Side.ATOMIC_TARGET);
                    return receiverNotReady(psn, out);
                }
            } catch (RegionInvalidException | BadAddressException e) {
                return refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, e.getMessage(), out);
            } catch (KernelException e) {
                return refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, e.getMessage(), out);
            }
            try {
                previous = packet.getOpcode() == Opcode.COMPARE_SWAP
                        ? dma.memory().compareAndExchangeLong(Tlb.frameOf(t), offset, packet.getAdd(), packet.getSwap())
                        : dma.memory().getAndAddLong(Tlb.frameOf(t), offset, packet.getAdd());
            } finally {
                dma.release(t, true);
            }
        }
        int slot = (int) (psn % atomicPsn.length);
        atomicPsn[slot] = psn;
        atomicResult[slot] = previous;
        out.add(qp.packet(Opcode.ATOMIC_ACKNOWLEDGE, psn).setAtomicResult(previous).setCreditLimit(creditLimit));
        return 1;
    }

    private void defer(Packet packet) {
        // Kept past its lane message, whose buffers a payload is a view of; a READ or FETCH_ADD needs none.
        deferred = packet.getPayload().isEmpty() ? packet : packet.toBuilder().clearPayload().build();
        stalled = true;
    }

    // ---- duplicates, refusals, acknowledgements --------------------------------------------------

    private void duplicate(Packet packet, Outbox out) {
        counters.increment(NicCounter.DUPLICATE_PACKETS);
        switch (packet.getOpcode()) {
            case READ_REQUEST -> {
                // Responses were lost or could not be placed: read again (reads are idempotent).
                executeRead(packet, out, true);
            }
            case FETCH_ADD, COMPARE_SWAP -> {
                int slot = (int) (packet.getPsn() % atomicPsn.length);
                if (atomicPsn[slot] == packet.getPsn()) {
                    out.add(qp.packet(Opcode.ATOMIC_ACKNOWLEDGE, packet.getPsn()).setAtomicResult(atomicResult[slot])
                            .setCreditLimit(creditLimit));
                }
            }
            default -> ackDue = true;
        }
    }

    /** Answers a request the responder will not execute; the requester completes it with an error. */
    private long refuse(Packet packet, Syndrome syndrome, String error, Outbox out) {
        counters.increment(syndrome == Syndrome.NAK_INVALID_REQUEST ? NicCounter.INVALID_REQUEST_NAKS_SENT : NicCounter.REMOTE_ACCESS_NAKS_SENT);
        out.add(acknowledgement(syndrome, packet.getPsn()).setError(error));
        stalled = true;
        return 1;
    }

    private long receiverNotReady(long psn, Outbox out) {
        rnrNakedFor = psn;
        stalled = true;
        counters.increment(NicCounter.RNR_NAKS_SENT);
        out.add(acknowledgement(Syndrome.RNR_NAK, psn).setRnrDelayNs(ctx.rnrDelayNs()));
        return 0;
    }

    /** The region a request may use, or null after refusing the request. */
    private MemoryRegion accessible(Packet packet, Access right, long length, Outbox out) {
        MemoryRegion region = nic.regionByRkey(packet.getRkey());
        String problem = null;
        if (region == null || region.endpoint() != qp.endpoint()) {
            problem = String.format("rkey 0x%x is not registered on %s of node %s", packet.getRkey(), qp.endpoint(), nic.nodeId());
        } else if (region.invalidReason() != null) {
            problem = String.format("rkey 0x%x names a region that is no longer usable: %s", packet.getRkey(), region.invalidReason());
        } else if (!region.allows(right)) {
            problem = String.format("rkey 0x%x does not allow %s", packet.getRkey(), right);
        } else if (!region.covers(packet.getRemoteAddress(), length)) {
            problem = String.format("range 0x%x+%d is outside %s", packet.getRemoteAddress(), length, region);
        }
        if (problem != null) {
            refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, problem, out);
            return null;
        }
        return region;
    }

    private Packet.Builder acknowledgement(Syndrome syndrome, long psn) {
        return qp.packet(Opcode.ACKNOWLEDGE, psn).setSyndrome(syndrome).setAckPsn(psn).setCreditLimit(creditLimit);
    }

    /** Acknowledges, once, what is executed and in place, with the credits granted so far. */
    void flushAcknowledgement(Outbox out) {
        long ackable = Math.min(expectedPsn, lowestParkedPsn()) - 1;
        if (!ackDue && ackable == ackSentPsn && creditLimit == ackSentCredit) {
            return;
        }
        out.add(acknowledgement(Syndrome.ACK, ackable));
        ackSentPsn = ackable;
        ackSentCredit = creditLimit;
        ackDue = false;
    }

    /** The sequence state, for diagnostics. */
    String describe() {
        return String.format("responder expected=%d credits=%d ackSent=%d parked psns=%d deliveriesWaiting=%d receivesPosted=%d%s%s",
                expectedPsn, creditLimit, ackSentPsn, parkedByPsn.size(), notifications.size(), qp.receives().size(),
                receiving == null ? "" : " receiving wr " + receiving.request().wrId() + " from psn " + receivingFirstPsn,
                deferred == null ? "" : " deferred=" + deferred.getPsn());
    }

    private void hold(Packet packet) {
        int slot = (int) (packet.getPsn() % held.length);
        Packet there = held[slot];
        if (there != null && there.getPsn() == packet.getPsn()) {
            counters.increment(NicCounter.DUPLICATE_PACKETS);
            return;
        }
        // A received payload is a view of its whole lane message: a packet kept past this message keeps
        // only its own bytes, not up to a batch's worth of neighbours.
        held[slot] = packet.getPayload().isEmpty() ? packet
                : packet.toBuilder().setPayload(ByteString.copyFrom(packet.getPayload().asReadOnlyByteBuffer())).build();
        counters.increment(NicCounter.OUT_OF_ORDER_PACKETS);
    }

    private Packet takeHeld(long psn) {
        int slot = (int) (psn % held.length);
        Packet there = held[slot];
        if (there != null && there.getPsn() == psn) {
            held[slot] = null;
            return there;
        }
        return null;
    }

    /**
     * What becomes visible once a message's data is in place: an event counter's increment, or a
     * posted receive's completion (with its byte count and, when the sender gave one, immediate data).
     */
    private record Delivery(long psn, EventCounter counter, ReceiveRequest receive, Completion.Opcode opcode, long bytes,
            Integer immediate) {
    }
}
