package io.pagewire.node.nic;

/**
 * The outcome of one work request: which one, what it was, how it ended and, for an error, a message
 * a person can act on. {@code value} is the counter's previous value for FETCH_ADD.
 */
public record Completion(long wrId, int qpn, Opcode opcode, CompletionStatus status, long bytes, long value, String error) {
    /** The work request kinds, as completions report them. */
    public enum Opcode {
        WRITE,
        WRITE_WITH_NOTIFY,
        READ,
        FETCH_ADD
    }

    public boolean ok() {
        return status == CompletionStatus.SUCCESS;
    }
}
