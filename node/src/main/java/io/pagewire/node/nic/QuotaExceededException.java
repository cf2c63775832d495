package io.pagewire.node.nic;

/** A request that would pass one of the node's per-session or per-node limits; the message names the setting (RESOURCE_EXHAUSTED). */
public class QuotaExceededException extends NicException {
    private static final long serialVersionUID = 1L;

    public QuotaExceededException(String message) {
        super(message);
    }
}
