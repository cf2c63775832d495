package io.pagewire.client;

/**
 * A work request that finished successfully: how many bytes it moved and, for FETCH_ADD, the
 * counter's value before the add. (A failed request completes its future exceptionally instead.)
 */
public record Completion(long wrId, int qpn, Opcode opcode, long bytes, long value) {
}
