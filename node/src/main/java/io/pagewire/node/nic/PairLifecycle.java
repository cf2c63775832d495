package io.pagewire.node.nic;

import java.util.ArrayList;
import java.util.List;

/**
 * A queue pair's state machine, apart from its data path: which transition {@code ibv_modify_qp} may take
 * from where, the connection attributes each one leaves, and the asynchronous events the transitions and
 * the first request raise. It decides; the queue pair carries the decisions out on its halves under its
 * lock, which guards everything here but the state itself (volatile, read by the NIC's loops unlocked).
 */
final class PairLifecycle {
    private final int qpn;
    private volatile QueuePairState state = QueuePairState.INIT;
    /** The connection's sequence numbers and timers, as its owner last set them. */
    private ConnectionAttributes attributes;
    /** Whether the pair reached RTS since it was created: its first send PSN is fixed from then on. */
    private boolean sentBefore;
    private boolean communicationEstablished;
    /** Whether SQ_DRAINED was raised for the drain under way. */
    private boolean drainReported;
    /** Why the pair entered ERROR, or null. */
    private String failure;
    /** Events raised, told to the pair's owner once the lock is released; null when none. */
    private ArrayList<QueuePairEvent> eventsDue;

    PairLifecycle(int qpn, ConnectionAttributes defaults) {
        this.qpn = qpn;
        this.attributes = defaults;
    }

    QueuePairState state() {
        return state;
    }

    /** Whether the pair executes its peer's requests: connected, and not failed. */
    boolean receiving() {
        QueuePairState s = state;
        return s == QueuePairState.READY || s == QueuePairState.DRAINING || s == QueuePairState.READY_TO_RECEIVE;
    }

    /** Whether the pair sends: RTS, or draining what it started. */
    boolean sending() {
        QueuePairState s = state;
        return s == QueuePairState.READY || s == QueuePairState.DRAINING;
    }

    /** Whether the pair can receive no more, for good: closed or failed. */
    boolean ended() {
        QueuePairState s = state;
        return s == QueuePairState.CLOSED || s == QueuePairState.ERROR;
    }

    ConnectionAttributes attributes() {
        return attributes;
    }

    /** @throws NicException unless the pair may connect (RTR): only from INIT */
    void checkMayConnect() {
        if (state != QueuePairState.INIT) {
            throw new NicException("queue pair " + qpn + " cannot connect: it is " + state
                    + (state == QueuePairState.ERROR ? "; reset it first" : ""));
        }
    }

    /** INIT to RTR, with the owner's attributes (checked by {@link #checkMayConnect} first). */
    void readyToReceive(ConnectionAttributes attributes) {
        this.attributes = attributes;
        state = QueuePairState.READY_TO_RECEIVE;
    }

    /** @throws NicException unless the pair may become ready to send: from RTR, RTS or SQD */
    void checkMayBecomeReady() {
        QueuePairState s = state;
        if (s != QueuePairState.READY_TO_RECEIVE && s != QueuePairState.READY && s != QueuePairState.DRAINING) {
            throw new NicException("queue pair " + qpn + " cannot become ready to send: it is " + s + "; connect it (RTR) first");
        }
    }

    /** Whether the next RTS is the pair's first: only then does its send PSN come from the owner's attributes. */
    boolean firstReady() {
        return !sentBefore;
    }

    /**
     * RTR, RTS or SQD to RTS: the timers are the owner's new ones, the sequence numbers are the ones the
     * pair started with (the send PSN from the first RTS, the receive PSN from RTR).
     */
    void ready(ConnectionAttributes owners) {
        long sendPsn = sentBefore ? attributes.sendPsn() : owners.sendPsn();
        attributes = owners.withPsns(sendPsn, attributes.receivePsn());
        sentBefore = true;
        state = QueuePairState.READY;
    }

    /**
     * RTS to SQD; a second drain is nothing.
     *
     * @return whether a drain started
     * @throws NicException from any state but RTS and SQD
     */
    boolean drain() {
        if (state == QueuePairState.DRAINING) {
            return false;
        }
        if (state != QueuePairState.READY) {
            throw new NicException("queue pair " + qpn + " cannot drain its send queue: it is " + state + ", not READY");
        }
        state = QueuePairState.DRAINING;
        drainReported = false;
        return true;
    }

    /** In SQD, once {@code drained} (every request started before the drain finished): SQ_DRAINED, once per drain. */
    void checkDrained(boolean drained) {
        if (state == QueuePairState.DRAINING && !drainReported && drained) {
            drainReported = true;
            raise(QueuePairEvent.SEND_QUEUE_DRAINED);
        }
    }

    /** A request from the peer arrived: the first one in RTR raises COMMUNICATION_ESTABLISHED. */
    void requestArrived() {
        if (state == QueuePairState.READY_TO_RECEIVE && !communicationEstablished) {
            communicationEstablished = true;
            raise(QueuePairEvent.COMMUNICATION_ESTABLISHED);
        }
    }

    /** @throws NicException while sends may not be posted yet: before RTS (in SQD and ERROR they are taken, and flushed in ERROR) */
    void checkMayPost() {
        if (state == QueuePairState.INIT || state == QueuePairState.READY_TO_RECEIVE) {
            throw new NicException("queue pair " + qpn + " is not connected for sending yet (it is " + state + "; sends need RTS)");
        }
    }

    /**
     * Whether a receive posted now is queued (INIT to SQD) rather than flushed (ERROR).
     *
     * @throws NicException when the pair is closed
     */
    boolean takesReceives() {
        return switch (state) {
            case INIT, READY_TO_RECEIVE, READY, DRAINING -> true;
            case ERROR -> false;
            case CLOSED -> throw new NicException("queue pair " + qpn + " is closed");
        };
    }

    /** What a request or receive flushed because of the pair's state says. */
    String flushedBecause() {
        return "queue pair " + qpn + " is " + state + (failure == null ? "" : " after an earlier failure: " + failure);
    }

    /**
     * To ERROR for {@code error}; the NIC's own move ({@code fatal}) raises QP_FATAL, and a pair on a shared
     * receive queue ({@code sharesReceives}) raises LAST_WQE_REACHED as it stops taking from it.
     */
    void fail(String error, boolean fatal, boolean sharesReceives) {
        state = QueuePairState.ERROR;
        failure = error;
        if (fatal) {
            raise(QueuePairEvent.FATAL);
        }
        if (sharesReceives) {
            raise(QueuePairEvent.LAST_WQE_REACHED);
        }
    }

    /**
     * To CLOSED, for good.
     *
     * @return false when the pair was closed already
     */
    boolean close() {
        if (state == QueuePairState.CLOSED) {
            return false;
        }
        state = QueuePairState.CLOSED;
        return true;
    }

    private void raise(QueuePairEvent event) {
        if (eventsDue == null) {
            eventsDue = new ArrayList<>(2);
        }
        eventsDue.add(event);
    }

    /** The events raised since the last call, in order, to be told once the lock is released; null when none. */
    List<QueuePairEvent> takeEvents() {
        List<QueuePairEvent> events = eventsDue;
        eventsDue = null;
        return events;
    }
}
