package io.pagewire.node.nic;

/**
 * How a requester recovers from loss, after InfiniBand RC: the acknowledgement timer with its
 * back-off and retry count, and the RNR back-off with its own. It decides and keeps the timers; the
 * {@link Requester} goes back to the first unacknowledged PSN (go-back-N) when it says so. Guarded by
 * the queue pair's lock, but for {@link #sweepWanted}, which the NIC's timeout sweep reads without it.
 */
final class Recovery {
    /** The acknowledgement timeout backs off to at most 2^this times its configured value. */
    static final int MAX_BACKOFF_SHIFT = 2;

    /** What an acknowledgement timer check found. */
    enum Timeout {
        /** Nothing to do: nothing in flight, or the timer has not expired. */
        NOT_YET,
        /** The timer expired: send again from the first unacknowledged PSN. */
        RESEND,
        /** The timer expired once too often: the oldest request fails with RETRY_EXCEEDED. */
        GIVE_UP
    }

    /** What an RNR NAK calls for. */
    enum Rnr {
        /** Go back to the NAKed PSN and wait the responder's delay. */
        WAIT,
        /** Already waiting: a copy of the same NAK. */
        ALREADY_WAITING,
        /** The NAKed packet ran out of RNR retries: its request fails with RNR_RETRY_EXCEEDED. */
        GIVE_UP
    }

    private final NicServices nic;
    /** Arms the NIC's acknowledgement-timeout sweep, which runs while any pair has work queued. */
    private final Runnable armSweep;
    /** The pair's timeout, retry counts and RNR delay: the node's defaults until its owner sets them. */
    private ConnectionAttributes attributes;
    /**
     * Whether the timeout sweep has work here: set (under the pair's lock) whenever a request is
     * queued, cleared only by the sweep (under the lock) once it finds nothing outstanding, and read
     * by the sweep without the lock, so an idle pair costs the sweep one read instead of its lock.
     * Queued work thus always leaves it set.
     */
    private volatile boolean sweepWanted;
    /** When the acknowledgement timer last started (progress, a resend, the end of a wait). */
    private long lastProgressNs;
    /** Timeouts in a row without progress while the link took data: retransmissions that reached it. */
    private int retries;
    /**
     * Timeouts in a row while no lane could take data: nothing went out for them, so they do not use
     * the retransmissions' budget; they have their own, as long, which ends a cut that lasts.
     */
    private int waitTimeouts;
    private long rnrPsn = -1;
    private int rnrRetries;
    private boolean rnrWaiting;
    private long rnrSinceNs;
    /** Work waits for a lane that cannot take data: the acknowledgement timer runs as if it were in flight. */
    private boolean linkWaiting;

    Recovery(NicServices nic, Runnable armSweep) {
        this.nic = nic;
        this.armSweep = armSweep;
        this.attributes = ConnectionAttributes.defaults(nic.context());
    }

    /** Takes the owner's timeout and retry counts, from the next timer check on. */
    void configure(ConnectionAttributes attributes) {
        this.attributes = attributes;
    }

    /** A request was queued: the sweep looks at this pair until it finds it idle. */
    void workQueued() {
        if (!sweepWanted) {
            sweepWanted = true;
            armSweep.run();
        }
    }

    /** Whether the timeout sweep has anything to look at here (read without the pair's lock). */
    boolean sweepWanted() {
        return sweepWanted;
    }

    /** Nothing is outstanding: the sweep may pass this pair by until work is queued again. */
    void idle() {
        sweepWanted = false;
    }

    /** Acknowledgements moved forward: the timer starts over and the retries are forgiven. */
    void progressed() {
        lastProgressNs = nic.clock().nanoTime();
        retries = 0;
        waitTimeouts = 0;
    }

    /** Every PSN up to {@code psn} was acknowledged: an RNR NAK at or before it is over. */
    void acknowledgedThrough(long psn) {
        if (psn >= rnrPsn) {
            rnrPsn = -1;
            rnrRetries = 0;
        }
    }

    /**
     * The timer starts over without forgiving retries: packets went out while nothing was in flight,
     * or a wait that was not the responder's silence (a local page fault) ended.
     */
    void restartTimer() {
        lastProgressNs = nic.clock().nanoTime();
    }

    /** Whether sending is paused for an RNR back-off. */
    boolean paused() {
        return rnrWaiting;
    }

    /**
     * The lane to the peer cannot take data ({@code true}) or can again. While it cannot, the timer
     * runs even with nothing in flight, so a peer that stays unreachable ends in RETRY_EXCEEDED.
     *
     * @param inFlight whether packets are sent and unacknowledged
     */
    void linkWaiting(boolean waiting, boolean inFlight) {
        if (waiting && !linkWaiting && !inFlight) {
            restartTimer();
        }
        if (!waiting && linkWaiting) {
            // The link takes data again (a cut healed, and the transport under it caught up): what timed
            // out meanwhile never went out, so the retransmissions still to come keep their whole budget.
            waitTimeouts = 0;
            restartTimer();
        }
        linkWaiting = waiting;
    }

    /** The responder answered RNR NAK to {@code psn}. */
    Rnr receiverNotReady(long psn) {
        if (rnrWaiting) {
            return Rnr.ALREADY_WAITING; // further copies of the same NAK while we already wait
        }
        if (psn != rnrPsn) {
            rnrPsn = psn;
            rnrRetries = 0;
        }
        rnrRetries++;
        if (attributes.rnrRetryCount() != ConnectionAttributes.RNR_RETRY_FOREVER && rnrRetries > attributes.rnrRetryCount()) {
            return Rnr.GIVE_UP;
        }
        rnrWaiting = true;
        rnrSinceNs = nic.clock().nanoTime();
        return Rnr.WAIT;
    }

    /** How long to wait before sending again after an RNR NAK that asked for {@code delayNs}: 1 us to 10 s. */
    static long rnrDelayNs(long delayNs) {
        return Math.max(1_000, Math.min(delayNs, 10_000_000_000L));
    }

    /** The RNR back-off is over: sending resumes and the timer starts over. */
    void rnrTimerExpired() {
        rnrWaiting = false;
        lastProgressNs = nic.clock().nanoTime();
        nic.observers().waited(WaitCause.RNR, lastProgressNs - rnrSinceNs);
    }

    /** Why a packet that ran out of RNR retries failed. */
    String rnrGaveUp(String peer, long psn) {
        return "node " + peer + " answered RNR NAK (a receive page fault) to psn " + psn + " " + rnrRetries
                + " times; raise the queue pair's rnr_retry (pagewire.nic.rnrRetryCount; 7 retries forever) or prefetch the destination";
    }

    /**
     * Checks the acknowledgement timer.
     *
     * @param inFlight whether packets are sent and unacknowledged
     */
    Timeout checkTimeout(long now, boolean inFlight) {
        if (rnrWaiting || (!inFlight && !linkWaiting) || attributes.waitsForever() || now - lastProgressNs < currentTimeoutNs()) {
            return Timeout.NOT_YET;
        }
        nic.counters().increment(NicCounter.ACK_TIMEOUTS);
        if (linkWaiting ? ++waitTimeouts > attributes.retryCount() : ++retries > attributes.retryCount()) {
            return Timeout.GIVE_UP;
        }
        lastProgressNs = now;
        return Timeout.RESEND;
    }

    /** Why the oldest request failed when the timer gave up. */
    String timeoutGaveUp(QpAddress peer) {
        return "no acknowledgement from queue pair " + peer.qpn() + " on node " + peer.node() + " after " + attributes.retryCount()
                + " retransmissions (" + attributes.ackTimeoutNs() / 1_000_000 + " ms apart, backing off to "
                + (attributes.ackTimeoutNs() << MAX_BACKOFF_SHIFT) / 1_000_000 + " ms)" + (linkWaiting ? "; no lane to the node could take data" : "");
    }

    /**
     * The acknowledgement timeout now: the configured one, doubled after each timeout that brought no
     * progress, up to four times it. A fixed timeout under a queue longer than itself (a loaded host,
     * a slow responder) makes go-back-N resend the whole window again and again, and the duplicates
     * lengthen the queue further; backing off, as TCP's retransmission timer does, lets it drain.
     */
    private long currentTimeoutNs() {
        return attributes.ackTimeoutNs() << Math.min(Math.max(retries, waitTimeouts), MAX_BACKOFF_SHIFT);
    }

    /** What a failing test prints. */
    String describe() {
        return (rnrWaiting ? " rnr-wait" : "") + (retries > 0 ? " timeouts=" + retries : "") + (linkWaiting ? " link-wait" : "")
                + (waitTimeouts > 0 ? " wait-timeouts=" + waitTimeouts : "");
    }
}
