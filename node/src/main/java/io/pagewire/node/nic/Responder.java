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
    /** Notifications waiting for parked data before them, in PSN order. */
    private final ArrayDeque<PendingNotification> notifications = new ArrayDeque<>();
    /** A READ or FETCH_ADD that must wait for parked writes before it. */
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
        this.creditLimit = ctx.creditsPerQp();
        this.atomicPsn = new long[ctx.sendWindowPackets()];
        this.atomicResult = new long[ctx.sendWindowPackets()];
        java.util.Arrays.fill(atomicPsn, -1);
    }

    void onRequest(Packet packet, Outbox out) {
        long psn = packet.getPsn();
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
            case WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY, WRITE_LAST_WITH_NOTIFY, WRITE_ONLY_WITH_NOTIFY ->
                    executeWrite(packet, out);
            case READ_REQUEST -> executeRead(packet, out, false);
            case FETCH_ADD -> executeFetchAdd(packet, out);
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
        long psn = packet.getPsn();
        ReceiveFaultPolicy policy = nic.receivePolicy(region.mode());
        int direct;
        try {
            direct = place(region, policy, packet.getRemoteAddress(), payload, psn, out);
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
        if (policy.spendsCredits()) {
            creditLimit += direct; // parked parts are credited when they are placed
        }
        if (notify) {
            notifyWhenVisible(psn, counter);
        }
        return 1;
    }

    /**
     * Writes a received payload at [va, va + size) of a region page by page; a page that is missing is
     * left to the region's receive-fault policy.
     *
     * @return how many parts were written directly (the rest were parked), or -1 when the policy says
     *         the receiver is not ready (nothing after the missing page was written)
     */
    private int place(MemoryRegion region, ReceiveFaultPolicy policy, long va, ByteString payload, long psn, Outbox out) {
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
            long t = policy.queuedBehind(space, vpn) ? Translator.NOT_RESIDENT : dma.acquire(region, vpn, true, Side.RECEIVE, out::flush);
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
                    if (policy.missing(region, vpn, at, src, parking) == ReceiveFaultPolicy.Verdict.NOT_READY) {
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
        // Recorded first: the completion may run at once on this thread if the page is already coming in.
        parkedByPsn.merge(psn, 1, Integer::sum);
        qp.parkStarted();
        try {
            nic.kernel().systemBuffer().park(space, address, part, failure -> qp.onParkedPartDone(psn, failure));
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

    private void notifyWhenVisible(long psn, EventCounter counter) {
        if (notifications.isEmpty() && lowestParkedPsn() > psn) {
            deliver(counter);
        } else {
            notifications.add(new PendingNotification(psn, counter));
        }
    }

    private void deliverNotifications() {
        while (!notifications.isEmpty() && lowestParkedPsn() > notifications.peek().psn()) {
            deliver(notifications.poll().counter());
        }
    }

    private void deliver(EventCounter counter) {
        counter.getAndAdd(1);
        counters.increment(NicCounter.NOTIFICATIONS_DELIVERED);
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
        for (int i = 0; i < responses; i++) {
            long offset = (long) i * mtu;
            int size = (int) Math.min(mtu, length - offset);
            ByteString payload;
            try {
                payload = dma.gather(region, packet.getRemoteAddress() + offset, size, Side.SEND, out, notResident);
            } catch (RegionInvalidException | BadAddressException e) {
                return again ? 0 : refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, e.getMessage(), out) + i;
            } catch (KernelException e) {
                return again ? 0 : refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, e.getMessage(), out) + i;
            }
            if (payload == null) {
                // The source page is out: fault it in; the requester asks again from this response.
                nic.responderFaults().raise(region, notResident[0], false, Side.SEND);
                out.flush();
                if (again) {
                    return 0;
                }
                receiverNotReady(psn + i, out);
                return i;
            }
            out.add(qp.packet(Opcode.READ_RESPONSE, psn + i).setPayload(payload));
            if (out.size() >= ctx.batchPackets()) {
                out.flush();
            }
        }
        return responses;
    }

    private long executeFetchAdd(Packet packet, Outbox out) {
        long psn = packet.getPsn();
        if (lowestParkedPsn() < psn) {
            defer(packet);
            return 0;
        }
        EventCounter counter = qp.endpoint().eventCounter(packet.getCounterId());
        if (counter == null || !counter.allows(Access.REMOTE_ATOMIC)) {
            return refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, "event counter " + packet.getCounterId() + " on " + qp.endpoint()
                    + (counter == null ? " does not exist" : " does not allow FETCH_ADD (REMOTE_ATOMIC)"), out);
        }
        long previous = counter.getAndAdd(packet.getAdd());
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
            case FETCH_ADD -> {
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
        return String.format("responder expected=%d credits=%d ackSent=%d parked psns=%d notificationsWaiting=%d%s",
                expectedPsn, creditLimit, ackSentPsn, parkedByPsn.size(), notifications.size(), deferred == null ? "" : " deferred=" + deferred.getPsn());
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

    private record PendingNotification(long psn, EventCounter counter) {
    }
}
