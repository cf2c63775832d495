package io.pagewire.node.nic;

import java.util.ArrayList;

/**
 * A queue pair's send queue and its sequence state, shared by its {@link Requester}, which numbers
 * and transmits requests, and its {@link Completer}, which retires them as answers arrive (as rxe's
 * requester and completer share the queue pair's PSNs). Guarded by the queue pair's lock.
 */
final class SendQueue {
    /** The outstanding requests, oldest first. */
    final WqeRing wqes = new WqeRing();
    /** The PSN the next posted request starts at. */
    long nextPsn;
    /** The next PSN to transmit; moved back to retransmit. */
    long sendPsn;
    /** Every PSN up to this one is acknowledged. */
    long ackedThrough = -1;
    long highestSent = -1;
    /** Why packets at or below highestSent are being sent again: the last thing that moved sendPsn back. */
    NicCounter resendCause = NicCounter.RETRANSMITTED_AFTER_ACK_TIMEOUT;
    /** READs with responses dropped for a local fault, asked for again (only those) once the faults are served. */
    final ArrayList<SendWqe> refetching = new ArrayList<>(2);

    /** Numbers the queue from {@code psn} on (before anything was posted). */
    void startAt(long psn) {
        nextPsn = psn;
        sendPsn = psn;
        ackedThrough = psn - 1;
        highestSent = psn - 1;
    }

    /** The first PSN not yet acknowledged: the oldest request's, or the next to be posted. */
    long unackedPsn() {
        SendWqe head = wqes.first();
        return head == null ? nextPsn : head.firstUnacked(ackedThrough);
    }

    /** Whether the packet at sendPsn went out before: this is its retransmission. */
    boolean resending() {
        return sendPsn <= highestSent;
    }

    /** Sends again from {@code psn} (never before the first unacknowledged one), for {@code cause}. */
    void rewind(long psn, NicCounter cause) {
        long to = Math.max(psn, unackedPsn());
        if (to < sendPsn) {
            sendPsn = to;
            resendCause = cause;
        }
    }

    /** Sends everything unacknowledged again, which asks for every missing READ response anyway. */
    void resendAll(NicCounter cause) {
        sendPsn = unackedPsn();
        resendCause = cause;
        for (SendWqe wqe : refetching) {
            wqe.refetch.clear();
        }
        refetching.clear();
    }

    /** Empties the queue: nothing is left to send. */
    void clear() {
        while (!wqes.isEmpty()) {
            wqes.removeFirst();
        }
        sendPsn = nextPsn;
    }

    String describe() {
        return String.format("requester next=%d send=%d acked=%d highestSent=%d unacked=%d wqes=%d", nextPsn, sendPsn, ackedThrough,
                highestSent, unackedPsn(), wqes.size());
    }
}
