package io.pagewire.node.nic;

/** Where a queue pair is in its life, after the states {@code ibv_modify_qp} moves an RC queue pair through. */
public enum QueuePairState {
    /** Created (or reset), not yet connected to a peer: receives may be posted. */
    INIT,
    /** Connected for receiving (RTR): the peer's requests are executed and answered; nothing is sent yet. */
    READY_TO_RECEIVE,
    /** Connected (RTS): requests flow both ways. */
    READY,
    /** Draining the send queue (SQD): requests already started finish, later ones wait for RTS. */
    DRAINING,
    /** A request failed, or the owner moved it here; everything posted was flushed and new requests complete as flushed. */
    ERROR,
    /** Closed by its owner. */
    CLOSED
}
