package io.pagewire.node.nic;

/** How the NIC reaches its peers: implemented by the fabric, which is the only part that knows gRPC. */
public interface PacketTransport {
    /**
     * Sends a batch to a peer; never blocks. The batch's slots and the staged payloads they view are the
     * NIC's again once this returns (and payloads may wrap frames it holds locked only for the duration of
     * this call), so the transport reads (serialises or copies) them before it returns.
     * A batch for an unreachable peer is dropped; retransmission recovers it.
     *
     * @param laneHint keeps one queue pair's packets on one lane while that lane is up
     */
    void send(String peer, int laneHint, PacketBatch batch);

    /**
     * Whether the lane to the peer that {@code laneHint} picks takes more data now (gRPC flow
     * control). When a lane that was not writable becomes so, the transport tells the NIC's router
     * (its {@code onPeerWritable}).
     */
    boolean isWritable(String peer, int laneHint);

    /** Whether {@code peer} can be reached at all (a link to it is up), as opposed to busy for now; UD drops what cannot. */
    default boolean reaches(String peer) {
        return true;
    }

    /** The peers this transport links to (a multicast datagram goes to each it reaches). */
    default java.util.Set<String> peers() {
        return java.util.Set.of();
    }
}
