package io.pagewire.node.nic;

/**
 * What a queue pair's owner sets for its connection, after the attributes {@code ibv_modify_qp} takes on
 * the way to RTR and RTS: the first packet sequence number each way ({@code sq_psn}, {@code rq_psn}), the
 * acknowledgement timeout ({@code timeout}; 0 waits forever) and how many retransmissions it allows
 * ({@code retry_cnt}), how many RNR NAKs one packet may take ({@code rnr_retry}; 7 forever), and how long
 * this pair's responder asks an RNR-NAKed sender to wait ({@code min_rnr_timer}). Times are in
 * nanoseconds: the InfiniBand encodings are the verbs library's to translate.
 */
public record ConnectionAttributes(long sendPsn, long receivePsn, long ackTimeoutNs, int retryCount, int rnrRetryCount, long rnrDelayNs) {
    /** Packet sequence numbers are 24 bits wide, as InfiniBand's. */
    public static final long PSN_LIMIT = 1L << 24;
    /** An {@code rnrRetryCount} that retries forever, as InfiniBand's 7. */
    public static final int RNR_RETRY_FOREVER = 7;
    /** Most retransmissions a queue pair may ask for. */
    public static final int MAX_RETRY_COUNT = 1000;

    public ConnectionAttributes {
        if (sendPsn < 0 || sendPsn >= PSN_LIMIT || receivePsn < 0 || receivePsn >= PSN_LIMIT) {
            throw new NicException("packet sequence numbers are 24 bits (0 to " + (PSN_LIMIT - 1) + "); were " + sendPsn + " to send and "
                    + receivePsn + " to receive");
        }
        if (ackTimeoutNs < 0) {
            throw new NicException("an acknowledgement timeout is 0 (none) or positive, was " + ackTimeoutNs + " ns");
        }
        if (retryCount < 0 || retryCount > MAX_RETRY_COUNT) {
            throw new NicException("a retry count is 0 to " + MAX_RETRY_COUNT + ", was " + retryCount);
        }
        if (rnrRetryCount < 0 || rnrRetryCount > RNR_RETRY_FOREVER) {
            throw new NicException("an RNR retry count is 0 to 7 (7: forever), was " + rnrRetryCount);
        }
        if (rnrDelayNs < 1_000 || rnrDelayNs > 10_000_000_000L) {
            throw new NicException("an RNR delay is 1 us to 10 s, was " + rnrDelayNs + " ns");
        }
    }

    /** The node's configured timers and counts, sequence numbers from 0: what a pair connected without attributes uses. */
    public static ConnectionAttributes defaults(NicContext ctx) {
        return new ConnectionAttributes(0, 0, ctx.ackTimeoutNs(), ctx.retryCount(), ctx.rnrRetryCount(), ctx.rnrDelayNs());
    }

    /** The same attributes with sequence numbers {@code send} and {@code receive}. */
    public ConnectionAttributes withPsns(long send, long receive) {
        return new ConnectionAttributes(send, receive, ackTimeoutNs, retryCount, rnrRetryCount, rnrDelayNs);
    }

    /** Whether the acknowledgement timer never gives up on a silent peer (InfiniBand's timeout 0). */
    public boolean waitsForever() {
        return ackTimeoutNs == 0;
    }
}
