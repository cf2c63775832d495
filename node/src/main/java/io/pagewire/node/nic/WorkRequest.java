package io.pagewire.node.nic;

/**
 * One operation posted to a queue pair, after {@code ibv_send_wr}. {@code wrId} is the caller's tag,
 * returned in the completion. Local memory is named by (lkey, address), remote memory by (rkey,
 * address), event counters on the peer's endpoint by id. An unsignalled request ({@code signaled}
 * false, ibverbs' work request without {@code IBV_SEND_SIGNALED}) puts no completion on the queue
 * when it succeeds; a failed one always does, and so does a FETCH_ADD, whose result travels only in
 * its completion (and a COMPARE_SWAP). {@code immediate} is what SEND_WITH_IMM and WRITE_WITH_IMM deliver in the peer's
 * receive completion. {@code add} is ibverbs' {@code compare_add}: what FETCH_ADD adds, what
 * COMPARE_SWAP compares the word with; {@code swap} is what COMPARE_SWAP stores when they are equal.
 */
public record WorkRequest(long wrId, Completion.Opcode opcode, int lkey, long localAddress, int length,
        long remoteAddress, long rkey, int counterId, long add, boolean signaled, int immediate, long swap) {

    public WorkRequest {
        signaled |= opcode == Completion.Opcode.FETCH_ADD || opcode == Completion.Opcode.COMPARE_SWAP;
        if (opcode == Completion.Opcode.RECV || opcode == Completion.Opcode.RECV_RDMA_WITH_IMM) {
            throw new IllegalArgumentException(opcode + " is a receive completion, not a work request; post a ReceiveRequest");
        }
    }

    public WorkRequest(long wrId, Completion.Opcode opcode, int lkey, long localAddress, int length,
            long remoteAddress, long rkey, int counterId, long add, boolean signaled) {
        this(wrId, opcode, lkey, localAddress, length, remoteAddress, rkey, counterId, add, signaled, 0, 0);
    }

    /** The same request, completing silently when it succeeds. */
    public WorkRequest unsignaled() {
        return new WorkRequest(wrId, opcode, lkey, localAddress, length, remoteAddress, rkey, counterId, add, false, immediate, swap);
    }

    /** SEND of [localAddress, +length) into the peer's next posted receive. */
    public static WorkRequest send(long wrId, int lkey, long localAddress, int length) {
        return new WorkRequest(wrId, Completion.Opcode.SEND, lkey, localAddress, length, 0, 0, 0, 0, true, 0, 0);
    }

    /** A SEND whose receive completion carries {@code immediate}. */
    public static WorkRequest sendWithImm(long wrId, int lkey, long localAddress, int length, int immediate) {
        return new WorkRequest(wrId, Completion.Opcode.SEND_WITH_IMM, lkey, localAddress, length, 0, 0, 0, 0, true, immediate, 0);
    }

    /** An RDMA WRITE that then consumes the peer's next posted receive, completing it with {@code immediate}. */
    public static WorkRequest writeWithImm(long wrId, int lkey, long localAddress, int length, long remoteAddress, long rkey,
            int immediate) {
        return new WorkRequest(wrId, Completion.Opcode.WRITE_WITH_IMM, lkey, localAddress, length, remoteAddress, rkey, 0, 0, true,
                immediate, 0);
    }

    /** FETCH_ADD on the 8-byte aligned word at the peer's remoteAddress (a region with REMOTE_ATOMIC); the completion carries the word before. */
    public static WorkRequest fetchAdd(long wrId, long remoteAddress, long rkey, long add) {
        return new WorkRequest(wrId, Completion.Opcode.FETCH_ADD, 0, 0, 0, remoteAddress, rkey, 0, add, true, 0, 0);
    }

    /** Replaces the peer's 8-byte word at remoteAddress with {@code swap} if it equals {@code compare}; the completion carries the word before. */
    public static WorkRequest compareSwap(long wrId, long remoteAddress, long rkey, long compare, long swap) {
        return new WorkRequest(wrId, Completion.Opcode.COMPARE_SWAP, 0, 0, 0, remoteAddress, rkey, 0, compare, true, 0, swap);
    }

    /** Whether this is an atomic (FETCH_ADD on an event counter or a word, or COMPARE_SWAP), whose result only its completion carries. */
    public boolean isAtomic() {
        return opcode == Completion.Opcode.FETCH_ADD || opcode == Completion.Opcode.COMPARE_SWAP;
    }

    /** Whether this request is a two-sided SEND (data into a posted receive, not an address). */
    public boolean isSend() {
        return opcode == Completion.Opcode.SEND || opcode == Completion.Opcode.SEND_WITH_IMM;
    }

    /** RDMA WRITE of [localAddress, +length) to the peer's [remoteAddress, +length). */
    public static WorkRequest write(long wrId, int lkey, long localAddress, int length, long remoteAddress, long rkey) {
        return new WorkRequest(wrId, Completion.Opcode.WRITE, lkey, localAddress, length, remoteAddress, rkey, 0, 0, true);
    }

    /** A WRITE that then adds one to event counter {@code counterId} of the peer's endpoint, once its data is visible. */
    public static WorkRequest writeWithNotify(long wrId, int lkey, long localAddress, int length, long remoteAddress, long rkey,
            int counterId) {
        return new WorkRequest(wrId, Completion.Opcode.WRITE_WITH_NOTIFY, lkey, localAddress, length, remoteAddress, rkey, counterId, 0, true);
    }

    /** RDMA READ of the peer's [remoteAddress, +length) into [localAddress, +length). */
    public static WorkRequest read(long wrId, int lkey, long localAddress, int length, long remoteAddress, long rkey) {
        return new WorkRequest(wrId, Completion.Opcode.READ, lkey, localAddress, length, remoteAddress, rkey, 0, 0, true);
    }

    /** Adds {@code add} to event counter {@code counterId} of the peer's endpoint; the completion carries the value before. */
    public static WorkRequest fetchAdd(long wrId, int counterId, long add) {
        return new WorkRequest(wrId, Completion.Opcode.FETCH_ADD, 0, 0, 0, 0, 0, counterId, add, true);
    }
}
