package io.pagewire.node.nic;

import io.pagewire.kernel.BadAddressException;
import io.pagewire.kernel.KernelException;
import io.pagewire.proto.fabric.Opcode;
import io.pagewire.proto.fabric.Syndrome;
import java.util.Arrays;
import java.util.function.Supplier;

/**
 * The receiving half of a queue pair (the responder of InfiniBand RC): it executes requests strictly
 * in PSN order (packets that arrive ahead of a gap wait in a reorder window, duplicates are answered
 * again rather than executed again, a gap that persists is NAKed), checks each against the regions
 * and rights it names, answers READs and atomics, and acknowledges what is executed and in place.
 * Where WRITE and SEND data lands, and what it makes visible when, is its {@link ReceivePlacement}'s;
 * a READ or atomic after parked data waits until that data is in. Guarded by the queue pair's lock.
 */
final class Responder {
    private static final int NAK_AFTER_PACKETS_AHEAD = 3;

    private final QueuePair qp;
    private final NicServices nic;
    private final Regions regions;
    private final ResponderFaults responderFaults;
    /** What a request that meets a NIC page fault is answered (an experiment may change it while the node runs). */
    private final Supplier<FaultAnswer> faultAnswer;
    private final NicContext ctx;
    private final NicCounters counters;
    private final DmaEngine dma;
    private final int mtu;
    private final Packet[] held;
    private final long[] notResident = new long[1];

    /** The next PSN to execute. */
    private long expectedPsn;
    /** How long this responder's RNR NAKs ask the sender to wait: the owner's min_rnr_timer, else the node's. */
    private long rnrDelayNs;
    private long nakSentFor = -1;
    private long rnrNakedFor = -1;
    private final Credits credits;
    private final ReceivePlacement placement;
    private long ackSentPsn = Long.MIN_VALUE;
    private long ackSentCredit;
    /** What the last acknowledgement said of parking SENDs (the requester assumes they park until told). */
    private boolean ackSentReceivesPark = true;
    private boolean ackDue;
    /** A READ or atomic that must wait for parked writes before it. */
    private Packet deferred;
    /** Set by an execution that stopped the queue (RNR, deferral, refusal). */
    private boolean stalled;
    private final long[] atomicPsn;
    private final long[] atomicResult;

    Responder(QueuePair qp) {
        this.qp = qp;
        QueuePairResources resources = qp.resources();
        this.nic = resources.services();
        this.regions = resources.regions();
        this.responderFaults = resources.responderFaults();
        this.faultAnswer = resources.faultAnswer();
        this.ctx = nic.context();
        this.counters = nic.counters();
        this.dma = nic.dma();
        this.mtu = ctx.mtuBytes();
        this.held = new Packet[ctx.reorderWindowPackets()];
        this.credits = qp.credits();
        this.placement = new ReceivePlacement(qp);
        this.atomicPsn = new long[ctx.sendWindowPackets()];
        this.atomicResult = new long[ctx.sendWindowPackets()];
        Arrays.fill(atomicPsn, -1);
        this.rnrDelayNs = ctx.rnrDelayNs();
    }

    /**
     * Takes the owner's attributes on the way to RTR: the RNR delay, and (the first time) the PSN the
     * peer's first request carries.
     */
    void configure(ConnectionAttributes attributes, boolean firstTime) {
        rnrDelayNs = attributes.rnrDelayNs();
        if (firstTime) {
            expectedPsn = attributes.receivePsn();
        }
    }

    void onRequest(Packet packet, Outbox out) {
        if (qp.unreliable()) {
            onUnreliableRequest(packet, out);
            return;
        }
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
                acknowledgement(out, Syndrome.NAK_SEQUENCE_ERROR, expectedPsn);
            }
            return;
        }
        run(packet, out);
    }

    // ---- UD -----------------------------------------------------------------------------------------

    /**
     * A datagram for a UD pair from {@code sender}: a one-packet SEND whose Q_Key matches the pair's is
     * placed in the next receive; anything else is dropped and counted. Nothing is answered.
     */
    void onDatagram(String sender, Packet packet, Outbox out) {
        Opcode opcode = packet.getOpcode();
        if (opcode != Opcode.SEND_ONLY && opcode != Opcode.SEND_ONLY_WITH_IMMEDIATE) {
            counters.increment(NicCounter.DROPPED_PACKETS);
            return;
        }
        if (packet.getQkey() != qp.qkey()) {
            counters.increment(NicCounter.UNRELIABLE_DROPPED_QKEY);
            return;
        }
        if (packet.payloadLength() > mtu) {
            counters.increment(NicCounter.UNRELIABLE_DROPPED_REFUSED);
            return;
        }
        placement.datagram(new Datagram(sender, Lids.of(sender), packet.getSrcQpn(), packet.getQkey(), packet.getGlobalRoute()), packet, out);
    }

    // ---- UC -----------------------------------------------------------------------------------------

    /** UC: the rest of a message is being dropped (a packet of it was lost, or it could not be taken). */
    private boolean dropping;
    /** UC: a message has begun and not ended. */
    private boolean inMessage;

    /**
     * A packet of an unreliable connected pair: executed in arrival order with no acknowledgement; a
     * gap in the sequence drops the message it falls in (its receive stays posted for the next one),
     * and so does a packet that cannot be executed (no receive, a page not resident, a refusal), each
     * counted by cause. Nothing is held, NAKed or answered.
     */
    private void onUnreliableRequest(Packet packet, Outbox out) {
        long psn = packet.getPsn();
        if (psn < 0 || psn < expectedPsn) {
            counters.increment(NicCounter.DUPLICATE_PACKETS);
            return;
        }
        Opcode opcode = packet.getOpcode();
        boolean starts = startsMessage(opcode);
        boolean ends = endsMessage(opcode);
        if (psn > expectedPsn && (inMessage || !starts)) {
            dropMessage(NicCounter.UNRELIABLE_DROPPED_INCOMPLETE);
        }
        expectedPsn = psn + 1;
        if (starts) {
            if (inMessage) {
                dropMessage(NicCounter.UNRELIABLE_DROPPED_INCOMPLETE); // a new message where the last one's end was lost
            }
            dropping = false;
        } else if (dropping) {
            if (ends) {
                dropping = false;
            }
            return;
        }
        inMessage = !ends;
        execute(packet, out);
        if (ends) {
            dropping = false;
            inMessage = false;
        }
    }

    /** UC: the message in progress is dropped; a receive it had taken goes back to the head of its queue. */
    private void dropMessage(NicCounter cause) {
        counters.increment(cause);
        placement.dropMessage();
        dropping = true;
        inMessage = false;
    }

    private static boolean startsMessage(Opcode opcode) {
        return switch (opcode) {
            case WRITE_MIDDLE, WRITE_LAST, WRITE_LAST_WITH_NOTIFY, WRITE_LAST_WITH_IMMEDIATE, SEND_MIDDLE, SEND_LAST,
                    SEND_LAST_WITH_IMMEDIATE -> false;
            default -> true;
        };
    }

    private static boolean endsMessage(Opcode opcode) {
        return opcode != Opcode.WRITE_FIRST && opcode != Opcode.WRITE_MIDDLE && opcode != Opcode.SEND_FIRST && opcode != Opcode.SEND_MIDDLE;
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
        int size = packet.payloadLength();
        if (size > mtu) {
            return refuse(packet, Syndrome.NAK_INVALID_REQUEST, "payload of " + size + " bytes exceeds the MTU of " + mtu, out);
        }
        // A zero-length WRITE names no memory: its rkey is not checked (the standard says so; it is how
        // UCX and others flush a connection).
        boolean empty = size == 0 && packet.getLength() == 0 && startsAndEndsMessage(packet.getOpcode());
        MemoryRegion region = empty ? null : accessible(packet, Access.REMOTE_WRITE, size, out);
        if (region == null && !empty) {
            return 1;
        }
        EventCounter counter = null;
        if (packet.getOpcode() == Opcode.WRITE_LAST_WITH_NOTIFY || packet.getOpcode() == Opcode.WRITE_ONLY_WITH_NOTIFY) {
            counter = qp.endpoint().eventCounter(packet.getCounterId());
            if (counter == null || !counter.allows(Access.REMOTE_WRITE)) {
                return refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, "event counter " + packet.getCounterId() + " on "
                        + qp.endpoint() + (counter == null ? " does not exist" : " does not allow notifications (REMOTE_WRITE)"), out);
            }
        }
        return switch (placement.write(region, packet, counter, out)) {
            case PLACED -> 1;
            case NOT_READY -> placement.takeFaulted() ? faulted(packet.getPsn(), out) : receiverNotReady(packet.getPsn(), out);
            case ACCESS_ERROR -> refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, placement.error(), out);
            default -> refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, placement.error(), out);
        };
    }

    /** Whether a WRITE packet is a whole message (ONLY, of any flavour). */
    private static boolean startsAndEndsMessage(Opcode opcode) {
        return opcode == Opcode.WRITE_ONLY || opcode == Opcode.WRITE_ONLY_WITH_NOTIFY || opcode == Opcode.WRITE_ONLY_WITH_IMMEDIATE;
    }

    // ---- SEND ---------------------------------------------------------------------------------------

    private long executeSend(Packet packet, Outbox out) {
        return switch (placement.send(packet, out)) {
            case PLACED -> 1;
            case NOT_READY -> placement.takeFaulted() ? faulted(packet.getPsn(), out) : receiverNotReady(packet.getPsn(), out);
            case INVALID -> refuse(packet, Syndrome.NAK_INVALID_REQUEST, placement.error(), out);
            case LENGTH_ERROR -> failReceive(packet, CompletionStatus.LOCAL_LENGTH_ERROR, Syndrome.NAK_INVALID_REQUEST, out);
            case PROTECTION_ERROR, ACCESS_ERROR -> failReceive(packet, CompletionStatus.LOCAL_PROTECTION_ERROR,
                    Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, out);
            case MEMORY_ERROR, OPERATIONAL_ERROR -> failReceive(packet, CompletionStatus.LOCAL_MEMORY_ERROR,
                    Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, out);
            case INVALIDATE_ERROR -> failReceive(packet, CompletionStatus.REMOTE_INVALID_REQUEST_ERROR, Syndrome.NAK_INVALID_REQUEST, out);
        };
    }

    /** The queue pair failed or closed: a receive a message was landing in completes as flushed. */
    void abandonMessage(String reason) {
        placement.abandon(reason);
    }

    /** The pair was reset: the receive a message was landing in is dropped without a completion. */
    void discardMessage() {
        placement.discard();
    }

    /**
     * The receive being filled cannot take this message: it completes with {@code status}, the sender's
     * request is refused, and the queue pair moves to ERROR, flushing what else was posted (as an RC
     * responder does after a local length or protection error).
     */
    private long failReceive(Packet packet, CompletionStatus status, Syndrome syndrome, Outbox out) {
        String error = placement.error();
        placement.failReceive(status, error);
        long consumed = refuse(packet, syndrome, error, out);
        qp.fail(null, CompletionStatus.FLUSHED, "a receive failed: " + error);
        return consumed;
    }

    /** A parked part is in place (or was dropped with its memory): acknowledge it, run what waited for it. */
    void parkedPartDone(long psn, Throwable failure, Outbox out) {
        if (!placement.parkedPartDone(psn)) {
            return;
        }
        ackDue = true;
        if (failure != null && !qp.unreliable()) {
            counters.increment(NicCounter.REMOTE_ACCESS_NAKS_SENT);
            acknowledgement(out, Syndrome.NAK_REMOTE_ACCESS_ERROR, psn)
                    .setError("the write's destination memory was freed before its parked data could be placed: " + failure.getMessage());
        }
        if (deferred != null && placement.lowestParkedPsn() > deferred.getPsn()) {
            Packet waiting = deferred;
            deferred = null;
            run(waiting, out);
        }
    }

    // ---- READ and FETCH_ADD -------------------------------------------------------------------------

    private long executeRead(Packet packet, Outbox out, boolean again) {
        long psn = packet.getPsn();
        if (placement.lowestParkedPsn() < psn) {
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
        // A zero-length READ names no memory: its rkey is not checked, and its one response is empty.
        MemoryRegion region = length == 0 ? null : accessible(packet, Access.REMOTE_READ, length, out);
        if (region == null && length != 0) {
            return again ? 0 : 1;
        }
        // Responses to a READ asked before are sent again: counted apart, and marked so for the requester.
        boolean resent = again || packet.getRetransmitted();
        for (int i = 0; i < responses; i++) {
            long offset = (long) i * mtu;
            int size = (int) Math.min(mtu, length - offset);
            int payload;
            try {
                payload = size == 0 ? 0 : dma.gather(region, packet.getRemoteAddress() + offset, size, Side.READ_SOURCE, resent, out, notResident);
            } catch (RegionInvalidException | BadAddressException e) {
                return again ? 0 : refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, e.getMessage(), out) + i;
            } catch (KernelException e) {
                return again ? 0 : refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, e.getMessage(), out) + i;
            }
            if (payload == DmaEngine.NOT_STAGED) {
                // The source page is out: fault it in; the requester asks again from this response. A fault
                // that already failed for good ends the READ instead of answering RNR NAK for ever.
                String failed = responderFaults.takeFailure(region.endpoint().space(), notResident[0]);
                if (failed != null) {
                    return again ? 0 : refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, "a page fault on the READ's source failed: "
                            + failed, out) + i;
                }
                responderFaults.raise(region, notResident[0], false, Side.READ_SOURCE);
                out.flush();
                if (again) {
                    return 0;
                }
                faulted(psn + i, out);
                return i;
            }
            if (!resent && region != null) {
                region.counters().sent(size);
            }
            qp.packet(out, Opcode.READ_RESPONSE, psn + i).setPayload(out.staging(), payload, size).setRetransmitted(resent);
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
        if (placement.lowestParkedPsn() < psn) {
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
                if (t == RegionPolicy.NOT_RESIDENT) {
                    String failed = responderFaults.takeFailure(region.endpoint().space(), vpn);
                    if (failed != null) {
                        return refuse(packet, Syndrome.NAK_REMOTE_OPERATIONAL_ERROR, "a page fault on the atomic's target failed: " + failed, out);
                    }
                    responderFaults.raise(region, vpn, true, Side.ATOMIC_TARGET);
                    return faulted(psn, out);
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
            region.endpoint().placed(address, 8);
        }
        int slot = (int) (psn % atomicPsn.length);
        atomicPsn[slot] = psn;
        atomicResult[slot] = previous;
        qp.packet(out, Opcode.ATOMIC_ACKNOWLEDGE, psn).setAtomicResult(previous).setCreditLimit(credits.grantedToPeer())
                .setReceivesPark(receivesPark());
        return 1;
    }

    private void defer(Packet packet) {
        // Kept past its lane message, whose packet slots are reused; a READ or FETCH_ADD needs no payload.
        deferred = packet.copyWithoutPayload();
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
                    qp.packet(out, Opcode.ATOMIC_ACKNOWLEDGE, packet.getPsn()).setAtomicResult(atomicResult[slot])
                            .setCreditLimit(credits.grantedToPeer()).setReceivesPark(receivesPark());
                }
            }
            default -> ackDue = true;
        }
    }

    /** Answers a request the responder will not execute; the requester completes it with an error. */
    private long refuse(Packet packet, Syndrome syndrome, String error, Outbox out) {
        if (qp.unreliable()) {
            dropMessage(NicCounter.UNRELIABLE_DROPPED_REFUSED); // UC answers nothing: the message is dropped
            return 1;
        }
        counters.increment(syndrome == Syndrome.NAK_INVALID_REQUEST ? NicCounter.INVALID_REQUEST_NAKS_SENT : NicCounter.REMOTE_ACCESS_NAKS_SENT);
        acknowledgement(out, syndrome, packet.getPsn()).setError(error);
        stalled = true;
        return 1;
    }

    /**
     * The request at {@code psn} met a NIC page fault (raised already): RNR NAK, or under
     * {@link FaultAnswer#DROP} nothing, so the requester's acknowledgement timeout (or a sequence NAK
     * that packets behind it draw) brings it back.
     */
    private long faulted(long psn, Outbox out) {
        if (faultAnswer.get() == FaultAnswer.DROP && !qp.unreliable()) {
            counters.increment(NicCounter.FAULT_DROPPED_REQUESTS);
            stalled = true;
            return 0;
        }
        return receiverNotReady(psn, out);
    }

    private long receiverNotReady(long psn, Outbox out) {
        if (qp.unreliable()) {
            // UC has no RNR: the message is dropped (the placement counted why), as the papers' NICs drop what they cannot place.
            placement.dropMessage();
            dropping = true;
            inMessage = false;
            return 1;
        }
        rnrNakedFor = psn;
        stalled = true;
        counters.increment(NicCounter.RNR_NAKS_SENT);
        acknowledgement(out, Syndrome.RNR_NAK, psn).setRnrDelayNs(rnrDelayNs);
        return 0;
    }

    /** The region a request may use, or null after refusing the request. */
    private MemoryRegion accessible(Packet packet, Access right, long length, Outbox out) {
        if (!qp.allowsRemote(right)) {
            refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, String.format("queue pair %d of node %s does not allow %s (its access flags)",
                    qp.qpn(), nic.nodeId(), right), out);
            return null;
        }
        if (Regions.isWindowRkey(packet.getRkey())) {
            return throughWindow(packet, right, length, out);
        }
        MemoryRegion region = regions.regionByRkey(packet.getRkey());
        if (region != null) {
            nic.contexts().read(ContextCache.Kind.REGION, region.rkey());
        }
        String problem = null;
        if (region == null || region.endpoint() != qp.endpoint()) {
            problem = String.format("rkey 0x%x is not registered on %s of node %s", packet.getRkey(), qp.endpoint(), nic.nodeId());
        } else if (region.invalidReason() != null) {
            problem = String.format("rkey 0x%x names a region that is no longer usable: %s", packet.getRkey(), region.invalidReason());
        } else if (!region.allows(right)) {
            problem = String.format("rkey 0x%x does not allow %s", packet.getRkey(), right);
        } else if (region.protectionMismatch(qp.protectionDomain()) != null) {
            problem = String.format("rkey 0x%x: %s", packet.getRkey(), region.protectionMismatch(qp.protectionDomain()));
        } else if (!region.covers(packet.getRemoteAddress(), length)) {
            problem = String.format("range 0x%x+%d is outside %s", packet.getRemoteAddress(), length, region);
        }
        if (problem != null) {
            refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, problem, out);
            return null;
        }
        return region;
    }

    /** The region a request may use through the memory window its rkey names, or null after refusing the request. */
    private MemoryRegion throughWindow(Packet packet, Access right, long length, Outbox out) {
        MemoryWindow window = regions.windowByRkey(packet.getRkey());
        String[] why = new String[1];
        MemoryRegion region = window == null || window.endpoint() != qp.endpoint() ? null
                : window.admit(packet.getRkey(), qp.qpn(), right, packet.getRemoteAddress(), length, why);
        if (region == null) {
            refuse(packet, Syndrome.NAK_REMOTE_ACCESS_ERROR, why[0] != null ? why[0]
                    : String.format("rkey 0x%x names no memory window of %s on node %s", packet.getRkey(), qp.endpoint(), nic.nodeId()), out);
        }
        return region;
    }

    private Packet acknowledgement(Outbox out, Syndrome syndrome, long psn) {
        return qp.packet(out, Opcode.ACKNOWLEDGE, psn).setSyndrome(syndrome).setAckPsn(psn).setCreditLimit(credits.grantedToPeer())
                .setReceivesPark(receivesPark());
    }

    /** Whether a SEND may park here: only a SHADOW region's missing page parks what lands in it. */
    private boolean receivesPark() {
        return !qp.endpoint().shadowRegions().isEmpty();
    }

    /** Acknowledges, once, what is executed and in place, with the credits granted so far. */
    void flushAcknowledgement(Outbox out) {
        if (qp.unreliable()) {
            ackDue = false; // UC acknowledges nothing
            return;
        }
        long ackable = Math.min(expectedPsn, placement.lowestParkedPsn()) - 1;
        boolean receivesPark = receivesPark();
        if (!ackDue && ackable == ackSentPsn && credits.grantedToPeer() == ackSentCredit && receivesPark == ackSentReceivesPark) {
            return;
        }
        acknowledgement(out, Syndrome.ACK, ackable);
        ackSentPsn = ackable;
        ackSentCredit = credits.grantedToPeer();
        ackSentReceivesPark = receivesPark;
        ackDue = false;
    }

    /** The sequence state, for diagnostics. */
    String describe() {
        return String.format("responder expected=%d ackSent=%d %s%s", expectedPsn, ackSentPsn, placement.describe(),
                deferred == null ? "" : " deferred=" + deferred.getPsn());
    }

    private void hold(Packet packet) {
        int slot = (int) (packet.getPsn() % held.length);
        Packet there = held[slot];
        if (there != null && there.getPsn() == packet.getPsn()) {
            counters.increment(NicCounter.DUPLICATE_PACKETS);
            return;
        }
        // A received packet is a slot of its lane message and its payload a view of the message's array,
        // both reused for the next message: a packet kept past this one is a copy with its own bytes.
        held[slot] = packet.copy();
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
}
