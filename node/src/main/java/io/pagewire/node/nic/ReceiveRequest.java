package io.pagewire.node.nic;

/**
 * A receive buffer posted to a queue pair, after {@code ibv_recv_wr} with one scatter element: the next
 * SEND that arrives is placed at [address, +length) of the region named by {@code lkey}, and its
 * completion carries {@code wrId}.
 */
public record ReceiveRequest(long wrId, int lkey, long address, int length) {
}
