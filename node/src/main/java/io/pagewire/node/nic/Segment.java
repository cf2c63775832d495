package io.pagewire.node.nic;

/**
 * One scatter/gather element of a work request or receive, after {@code ibv_sge}: {@code length} bytes
 * at {@code address} of the local region named by {@code lkey}. A zero-length element names no memory
 * and is not checked, as an HCA skips it; a negative length (what a ring may carry) is refused when posted.
 */
public record Segment(int lkey, long address, int length) {
}
