package io.pagewire.node.nic;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The bandwidth one session's queue pairs may send together ({@code pagewire.quota.sendBytesPerSecondPerSession}):
 * a pacer that the NIC's requesters consult before each packet, as a NIC's per-queue-pair rate
 * limiter does (ibv_modify_qp_rate_limit's packet pacing), but shared by every queue pair of the
 * session so that opening more of them buys no more. Data segments count their payload, READ
 * requests the bytes they ask for, atomics their 8 bytes, each plus {@link #PACKET_HEADER_BYTES}.
 *
 * <p>The rule is the generic cell rate algorithm in bytes: a theoretical time at which the session
 * has sent everything at its rate, moved on by each packet's cost; a packet may go while that time
 * is at most one burst ahead of now. A requester told to wait sleeps on the NIC's timers until half a
 * burst is free again, so a paced session wakes its queue pair about twice per burst, not per packet.
 * Shared across the session's queue-pair locks: one compare-and-set per packet.
 */
final class SendAllowance {
    /** What a packet's headers count for, beside its payload: a flood of tiny packets is paced too. */
    static final int PACKET_HEADER_BYTES = 64;

    private final long bytesPerSecond;
    private final long burstNs;
    private final AtomicLong theoreticalNs;

    /**
     * @param bytesPerSecond the session's sustained rate, positive
     * @param burstBytes what it may send back to back after a pause
     * @param nowNs the NIC clock's present time
     */
    SendAllowance(long bytesPerSecond, long burstBytes, long nowNs) {
        if (bytesPerSecond <= 0 || burstBytes <= 0) {
            throw new IllegalArgumentException("a send allowance needs a positive rate and burst, was " + bytesPerSecond + " B/s and "
                    + burstBytes + " B");
        }
        this.bytesPerSecond = bytesPerSecond;
        this.burstNs = costNs(burstBytes);
        this.theoreticalNs = new AtomicLong(nowNs);
    }

    /** How long the next packet must wait (0: it may go now), sized to let half a burst go at the wake. */
    long delayNs(long nowNs) {
        long ahead = theoreticalNs.get() - nowNs;
        return ahead <= burstNs ? 0 : ahead - burstNs / 2;
    }

    /** Counts a packet of {@code payloadBytes} as sent at {@code nowNs}. */
    void spend(int payloadBytes, long nowNs) {
        long cost = costNs(payloadBytes + (long) PACKET_HEADER_BYTES);
        long before;
        do {
            before = theoreticalNs.get();
        } while (!theoreticalNs.compareAndSet(before, Math.max(before, nowNs) + cost));
    }

    long bytesPerSecond() {
        return bytesPerSecond;
    }

    private long costNs(long bytes) {
        return Math.max(1, (long) (bytes * 1e9 / bytesPerSecond));
    }
}
