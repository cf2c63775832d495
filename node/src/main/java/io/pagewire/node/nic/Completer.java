package io.pagewire.node.nic;

import io.pagewire.kernel.KernelException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.CompletionException;

/**
 * The completing half of a queue pair's requester (rxe's completer): it takes the responder's answers
 * (acknowledgements, NAKs, READ responses, atomic results), places what lands here, retires finished
 * requests in order with their completions, and decides with {@link Recovery} when to go back and send
 * again (a sequence NAK, an RNR NAK's delay, the acknowledgement timer). Guarded by the queue pair's lock.
 */
final class Completer {
    private final QueuePair qp;
    private final PairCompletions completions;
    private final NicServices nic;
    private final NicCounters counters;
    private final DmaEngine dma;
    private final int mtu;
    private final SendQueue sq;
    private final Recovery recovery;
    private final Credits credits;
    private final LocalFaults faults;

    Completer(QueuePair qp, SendQueue sq, Recovery recovery, LocalFaults faults) {
        this.qp = qp;
        this.completions = qp.completions();
        this.nic = qp.resources().services();
        this.counters = nic.counters();
        this.dma = nic.dma();
        this.mtu = nic.context().mtuBytes();
        this.sq = sq;
        this.recovery = recovery;
        this.credits = qp.credits();
        this.faults = faults;
    }

    void onAcknowledge(Packet packet) {
        credits.peerGranted(packet.getCreditLimit(), packet.getReceivesPark());
        long psn = packet.getAckPsn();
        switch (packet.getSyndrome()) {
            case ACK -> acknowledged(psn);
            case NAK_SEQUENCE_ERROR -> {
                counters.increment(NicCounter.SEQUENCE_NAKS_RECEIVED);
                acknowledged(psn - 1);
                sq.rewind(psn, NicCounter.RETRANSMITTED_AFTER_SEQUENCE_NAK);
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
        WqeRing wqes = sq.wqes;
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
                            sq.refetching.add(wqe);
                        }
                        wqe.refetch.set((int) (psn - wqe.psnFirst));
                        faults.raise(wqe, wqe.regions[i], missing, true, Side.READ_TARGET, out);
                        return false;
                    }
                    wqe.regions[i].counters().received(take);
                    offset += take;
                }
                start = end;
            }
            return true;
        } catch (RegionInvalidException | KernelException e) {
            qp.fail(wqe, LocalFaults.statusOf(e), e.getMessage());
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
                    faults.raise(wqe, wqe.regions[i], missing, true, Side.READ_TARGET, out);
                    return false;
                }
                wqe.regions[i].counters().received(word.position() - from);
            }
            return true;
        } catch (RegionInvalidException | KernelException e) {
            qp.fail(wqe, LocalFaults.statusOf(e), e.getMessage());
        }
        return false;
    }

    void onAtomicAcknowledge(Packet packet, Outbox out) {
        WqeRing wqes = sq.wqes;
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

    /** The fault that paused the queue pair was served (or failed). */
    void faultResolved(SendWqe wqe, long vpn, Throwable error, Outbox out) {
        faults.resolved(vpn);
        // Time spent waiting for a local page is not the responder's silence: the acknowledgement
        // timer starts again from here, as it does after an RNR delay.
        recovery.restartTimer();
        boolean outstanding = sq.wqes.indexOf(wqe.psnFirst) >= 0;
        if (error != null) {
            Throwable cause = error instanceof CompletionException && error.getCause() != null ? error.getCause() : error;
            if (outstanding) {
                qp.fail(wqe, LocalFaults.statusOf(cause), "a local page fault failed: " + cause.getMessage());
            }
            return;
        }
        if (wqe.isAtomic() && wqe.atomicDone && !wqe.atomicPlaced && outstanding) {
            wqe.atomicPlaced = placeAtomicResult(wqe, out);
            completeFinished();
        }
    }

    /** Every PSN up to {@code psn} is acknowledged (UC's and UD's requests acknowledge themselves once sent). */
    void acknowledged(long psn) {
        if (psn > sq.ackedThrough && psn < sq.nextPsn) {
            sq.ackedThrough = psn;
            recovery.progressed();
            recovery.acknowledgedThrough(psn);
        }
        completeFinished();
    }

    private void completeFinished() {
        WqeRing wqes = sq.wqes;
        int finished = 0;
        try {
            while (!wqes.isEmpty()) {
                SendWqe wqe = wqes.first();
                if (!wqe.done(sq.ackedThrough)) {
                    return;
                }
                wqes.removeFirst();
                finished++;
                // A finished READ or FETCH_ADD acknowledges itself and everything before it.
                sq.ackedThrough = Math.max(sq.ackedThrough, wqe.psnLast());
                completions.complete(wqe, CompletionStatus.SUCCESS, null);
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

    /** Reports a request that ran on this node: its completion, or its failure and the pair's move to ERROR. */
    void finishLocally(SendWqe.LocalOperation op) {
        if (op.status() == CompletionStatus.SUCCESS) {
            qp.completeLocal(op.wr(), op.status(), null);
        } else {
            qp.failLocal(op.wr(), op.status(), op.error());
        }
    }

    private void refused(long psn, CompletionStatus status, String error) {
        acknowledged(psn - 1);
        int index = sq.wqes.indexOf(psn);
        if (index >= 0) {
            qp.fail(sq.wqes.get(index), status, "node " + qp.peer().node() + " refused the request: " + error);
        }
    }

    private void receiverNotReady(long psn, long delayNs) {
        switch (recovery.receiverNotReady(psn)) {
            case WAIT -> {
                sq.rewind(psn, NicCounter.RETRANSMITTED_AFTER_RNR_NAK);
                nic.timers().schedule(Recovery.rnrDelayNs(delayNs), qp::onRnrTimerExpired);
            }
            case GIVE_UP -> {
                int index = sq.wqes.indexOf(psn);
                if (index >= 0) {
                    qp.fail(sq.wqes.get(index), CompletionStatus.RNR_RETRY_EXCEEDED, recovery.rnrGaveUp(qp.peer().node(), psn));
                }
            }
            case ALREADY_WAITING -> { }
        }
    }

    void rnrTimerExpired() {
        recovery.rnrTimerExpired();
    }

    /** @return true when the acknowledgement timer expired and packets are to be sent again */
    boolean checkTimeout(long now) {
        if (sq.wqes.isEmpty()) {
            recovery.idle();
            return false;
        }
        if (faults.any()) {
            return false;
        }
        switch (recovery.checkTimeout(now, sq.highestSent >= sq.unackedPsn())) {
            case RESEND -> {
                sq.resendAll(NicCounter.RETRANSMITTED_AFTER_ACK_TIMEOUT);
                return true;
            }
            case GIVE_UP -> qp.fail(sq.wqes.first(), CompletionStatus.RETRY_EXCEEDED, recovery.timeoutGaveUp(qp.peer()));
            case NOT_YET -> { }
        }
        return false;
    }

    /** The link to the peer came back: everything unacknowledged goes again (the responder drops what it has). */
    void replay() {
        sq.resendAll(NicCounter.RETRANSMITTED_AFTER_LANE_LOSS);
        recovery.restartTimer();
    }

    /** The oldest outstanding request, or null. */
    SendWqe oldest() {
        return sq.wqes.first();
    }

    /** Drops every outstanding request without a completion: the pair was reset, as RESET drops a send queue. */
    void discardAll() {
        if (!sq.wqes.isEmpty()) {
            qp.endpoint().retireWorkRequests(sq.wqes.size());
        }
        sq.clear();
    }

    /** Completes every outstanding request, in order: {@code failed} with its status, the rest as flushed. */
    void failAll(SendWqe failed, CompletionStatus status, String error, String flushReason) {
        WqeRing wqes = sq.wqes;
        if (!wqes.isEmpty()) {
            qp.endpoint().retireWorkRequests(wqes.size());
        }
        while (!wqes.isEmpty()) {
            SendWqe wqe = wqes.removeFirst();
            if (wqe == failed) {
                completions.complete(wqe, status, error);
            } else {
                completions.complete(wqe, CompletionStatus.FLUSHED, flushReason);
            }
            if (wqe.localAfter != null) {
                // They ran when posted; their completions are flushed with the rest of the queue.
                wqe.localAfter.forEach(op -> qp.completeLocal(op.wr(), CompletionStatus.FLUSHED, flushReason));
            }
        }
        sq.clear();
    }
}
