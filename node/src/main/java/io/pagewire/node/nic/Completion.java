package io.pagewire.node.nic;

/**
 * The outcome of one work request or posted receive: which one, what it was, how it ended and, for an
 * error, a message a person can act on. {@code value} is the counter's previous value for FETCH_ADD;
 * {@code immediate} is the sender's 32 bits when {@code hasImmediate} (RECV of a SEND_WITH_IMM,
 * RECV_RDMA_WITH_IMM); {@code solicited} says the sender asked for a solicited event (IBV_SEND_SOLICITED);
 * {@code invalidated} says the sender's SEND_WITH_INVALIDATE invalidated the window whose rkey is {@code immediate}.
 * {@code source} is who sent a UD receive's datagram (null for every other completion).
 */
public record Completion(long wrId, int qpn, Opcode opcode, CompletionStatus status, long bytes, long value, String error,
        boolean hasImmediate, int immediate, boolean solicited, boolean invalidated, Datagram source) {
    /** The work request kinds, as completions report them (after {@code ibv_wc_opcode}). */
    public enum Opcode {
        WRITE,
        WRITE_WITH_NOTIFY,
        READ,
        FETCH_ADD,
        /** Replaces an 8-byte word of the peer's memory if it equals a given value; the completion's value is the word before. */
        COMPARE_SWAP,
        /** A two-sided send into the peer's next posted receive. */
        SEND,
        /** A SEND whose receive completion carries 32 bits of immediate data. */
        SEND_WITH_IMM,
        /** An RDMA WRITE that also consumes the peer's next posted receive, completing it with immediate data. */
        WRITE_WITH_IMM,
        /** A posted receive that a SEND filled (the receiver's side). */
        RECV,
        /** A posted receive that a WRITE_WITH_IMM consumed: no data in the buffer, the write's length and immediate data. */
        RECV_RDMA_WITH_IMM,
        /** Binds (or unbinds) a memory window of the requester's own endpoint; no packet goes out. */
        BIND_WINDOW,
        /** Invalidates a type 2 memory window of the requester's own endpoint; no packet goes out. */
        LOCAL_INVALIDATE,
        /** A SEND that then invalidates one of the peer's type 2 memory windows (its rkey in {@code immediate}). */
        SEND_WITH_INVALIDATE
    }

    /** A completion without immediate data. */
    public Completion(long wrId, int qpn, Opcode opcode, CompletionStatus status, long bytes, long value, String error,
            boolean hasImmediate, int immediate, boolean solicited, boolean invalidated) {
        this(wrId, qpn, opcode, status, bytes, value, error, hasImmediate, immediate, solicited, invalidated, null);
    }

    public Completion(long wrId, int qpn, Opcode opcode, CompletionStatus status, long bytes, long value, String error) {
        this(wrId, qpn, opcode, status, bytes, value, error, false, 0, false, false);
    }

    /** A completion with immediate data, not solicited. */
    public Completion(long wrId, int qpn, Opcode opcode, CompletionStatus status, long bytes, long value, String error,
            boolean hasImmediate, int immediate) {
        this(wrId, qpn, opcode, status, bytes, value, error, hasImmediate, immediate, false, false);
    }

    public boolean ok() {
        return status == CompletionStatus.SUCCESS;
    }

    /** Whether this completes a posted receive rather than a work request of the send queue. */
    public boolean isReceive() {
        return opcode == Opcode.RECV || opcode == Opcode.RECV_RDMA_WITH_IMM;
    }
}
