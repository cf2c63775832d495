package io.pagewire.node.nic;

/**
 * What a responder sends back when a peer's request meets a NIC page fault (an ON_DEMAND page not
 * mapped, a READ source or atomic target not resident): the choice behind ODP's tail latencies.
 */
public enum FaultAnswer {
    /**
     * RNR NAK with the responder's delay: the requester comes back after it, however long the fault
     * takes (mlx5 does this for a faulting WRITE or SEND).
     */
    RNR_NAK,
    /**
     * Nothing: the request is dropped as a NIC that cannot hold it while the fault is served drops it,
     * and only the requester's acknowledgement timeout brings it back. A fault then costs the timeout,
     * and one that outlives it costs a retransmission that meets the fault again.
     */
    DROP
}
