package io.pagewire.client;

import java.time.Duration;

/**
 * How a queue pair retries, after the attributes {@code ibv_modify_qp} takes on the way to RTS: the
 * acknowledgement timeout ({@link Duration#ZERO}: wait forever) and how many resends it allows, how many
 * RNR NAKs one packet may take (7: forever), and how long this pair's receiver asks a sender it turns
 * away to wait. The node raises a timeout below its {@code pagewire.nic.minAckTimeoutNs} to that floor.
 */
public record Retries(Duration ackTimeout, int retryCount, int rnrRetryCount, Duration rnrDelay) {
    /** An {@link #rnrRetryCount} that retries forever. */
    public static final int FOREVER = 7;

    public Retries {
        if (ackTimeout.isNegative() || retryCount < 0 || rnrRetryCount < 0 || rnrRetryCount > FOREVER || rnrDelay.isNegative()) {
            throw new IllegalArgumentException("retries take a timeout of 0 (forever) or more, a retry count of 0 or more, an RNR retry count"
                    + " of 0 to 7 (7: forever) and a positive RNR delay; were " + ackTimeout + ", " + retryCount + ", " + rnrRetryCount
                    + ", " + rnrDelay);
        }
    }
}
