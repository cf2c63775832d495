package io.pagewire.node.nic;

/**
 * What a requester may send per second: its session's send allowance ({@code pagewire.quota.sendBytesPerSecondPerSession}),
 * shared by every queue pair of the session, and the pair's own rate limit ({@code ibv_modify_qp_rate_limit});
 * a packet waits for whichever is later, the pair sleeping on the NIC's timers meanwhile. Guarded by
 * the queue pair's lock.
 */
final class Pacing {
    /** The longest a paced pair sleeps before it looks at its allowance again. */
    static final long MAX_SLEEP_NS = 100_000_000L;

    private final NicServices nic;
    private final Runnable wake;
    /** The session's send allowance, or null when it is not paced. */
    private final SendAllowance session;
    /** This pair's own rate limit (set by its application), or null. */
    private SendAllowance own;
    private boolean waiting;
    private long waitSinceNs;

    /** @param wake what the NIC's timers run when the pair may look at its allowance again */
    Pacing(NicServices nic, SendAllowance session, Runnable wake) {
        this.nic = nic;
        this.session = session;
        this.wake = wake;
    }

    /** Sets or (null) removes the pair's own rate limit. */
    void limit(SendAllowance value) {
        own = value;
    }

    /** Whether the pair sleeps until its allowance has room. */
    boolean waiting() {
        return waiting;
    }

    /**
     * Whether the next packet may go now; if not, the pair sleeps on the NIC's timers until the
     * allowance has room for half a burst (nothing in flight meanwhile keeps the acknowledgement timer
     * from running, as for a credit wait).
     */
    boolean hasRoom() {
        if (session == null && own == null) {
            return true;
        }
        long now = nic.clock().nanoTime();
        long delay = Math.max(session == null ? 0 : session.delayNs(now), own == null ? 0 : own.delayNs(now));
        if (delay == 0) {
            return true;
        }
        waiting = true;
        waitSinceNs = now;
        nic.counters().increment(NicCounter.RATE_LIMIT_WAITS);
        // A very slow limit sleeps in steps: a pair closed meanwhile leaves no timer (and no reference to
        // itself) behind for longer than one step, whatever rate its application chose.
        nic.timers().schedule(Math.min(delay, MAX_SLEEP_NS), wake);
        return false;
    }

    /** Counts a packet just queued against the allowances, where they are set. */
    void spend(int payloadBytes) {
        if (session != null || own != null) {
            long now = nic.clock().nanoTime();
            if (session != null) {
                session.spend(payloadBytes, now);
            }
            if (own != null) {
                own.spend(payloadBytes, now);
            }
        }
    }

    /** The pair's sleep is over: it looks at its allowance again. */
    void timerExpired() {
        if (waiting) {
            waiting = false;
            nic.observers().waited(WaitCause.RATE_LIMIT, nic.clock().nanoTime() - waitSinceNs);
        }
    }
}
