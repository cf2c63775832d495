package io.pagewire.client;

/** The operations a queue pair performs. */
public enum Opcode {
    WRITE,
    WRITE_WITH_NOTIFY,
    READ,
    FETCH_ADD,
    /** Replaces an 8-byte word of the peer's memory if it equals a given value. */
    COMPARE_SWAP,
    /** Two-sided: the data goes into the peer's next posted receive. */
    SEND,
    /** A SEND whose receive completion carries 32 bits of immediate data. */
    SEND_WITH_IMM,
    /** An RDMA WRITE that also consumes the peer's next posted receive, completing it with immediate data. */
    WRITE_WITH_IMM,
    /** The completion of a posted receive that a SEND filled. */
    RECV,
    /** The completion of a posted receive that a WRITE_WITH_IMM consumed (its length and immediate data; the buffer is untouched). */
    RECV_RDMA_WITH_IMM
}
