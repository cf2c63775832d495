package io.pagewire.client;

/**
 * A work request or posted receive that finished successfully: how many bytes it moved, for FETCH_ADD
 * the counter's value before the add, and for a receive the sender's immediate data when
 * {@code hasImmediate}. (A failed one completes its future exceptionally instead.)
 */
public record Completion(long wrId, int qpn, Opcode opcode, long bytes, long value, boolean hasImmediate, int immediate) {
    /** A completion without immediate data. */
    public Completion(long wrId, int qpn, Opcode opcode, long bytes, long value) {
        this(wrId, qpn, opcode, bytes, value, false, 0);
    }
}
