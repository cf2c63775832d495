package io.pagewire.node.nic;

/** Which way data moves through the DMA engine, for counting faults by side. */
enum Side {
    /** Gathering from local memory to send (WRITE data, READ responses). */
    SEND,
    /** Scattering received data into local memory (WRITE at the responder, READ responses at the requester). */
    RECEIVE,
    /** Scattering a SEND into a posted receive buffer (counted apart from RDMA-write targets). */
    RECEIVE_BUFFER
}
