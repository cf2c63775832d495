package io.pagewire.kernel;

/** A pin that would take an address space past its memlock limit, its application past its share, or the node past its pin limit. */
public final class PinLimitExceededException extends KernelException {
    private static final long serialVersionUID = 1L;

    /** Which of the two limits was hit. */
    public enum Limit {
        /** The per-address-space limit, like {@code RLIMIT_MEMLOCK}. */
        MEMLOCK,
        /** The node-wide limit on pinned memory. */
        NODE,
        /** One application's share of the node-wide limit ({@code pagewire.quota.callerShare}). */
        SHARE
    }

    private final Limit limit;
    private final long limitBytes;
    private final long wouldPinBytes;

    public PinLimitExceededException(Limit limit, long limitBytes, long wouldPinBytes, String message) {
        super(message);
        this.limit = limit;
        this.limitBytes = limitBytes;
        this.wouldPinBytes = wouldPinBytes;
    }

    public Limit limit() {
        return limit;
    }

    public long limitBytes() {
        return limitBytes;
    }

    /** The pinned total the refused request would have produced. */
    public long wouldPinBytes() {
        return wouldPinBytes;
    }
}
