package io.pagewire.client;

/**
 * One operation for {@link QueuePair#post}. Local memory is named by a registered region and an
 * address in it, remote memory by an address and the peer's rkey, event counters by their id on the
 * peer's endpoint.
 *
 * <p>A request is signalled unless made {@link #unsignaled()}. As in ibverbs, an unsignalled request
 * that succeeds sends no completion of its own: its future completes when a later request of the
 * same queue pair completes (a reliable connection completes in order), so post a signalled request
 * now and then, as perftest does every {@code --cq-mod} requests. A failed request always completes.
 */
public record WorkRequest(Opcode opcode, MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey,
        int counterId, long add, boolean signaled, int immediate, long swap, boolean fence, boolean solicited) {

    public WorkRequest {
        if (opcode == Opcode.RECV || opcode == Opcode.RECV_RDMA_WITH_IMM) {
            throw new IllegalArgumentException(opcode + " names a receive's completion; post receives with QueuePair.postReceive");
        }
    }

    /** A request without immediate data. */
    public WorkRequest(Opcode opcode, MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey, int counterId,
            long add, boolean signaled) {
        this(opcode, local, localAddress, length, remoteAddress, rkey, counterId, add, signaled, 0, 0);
    }

    /** A request without a fence, whose receive completion is not a solicited event. */
    public WorkRequest(Opcode opcode, MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey, int counterId,
            long add, boolean signaled, int immediate, long swap) {
        this(opcode, local, localAddress, length, remoteAddress, rkey, counterId, add, signaled, immediate, swap, false, false);
    }

    /** The same request, held back until every READ and atomic posted before it on its queue pair finished (IBV_SEND_FENCE). */
    public WorkRequest fenced() {
        return new WorkRequest(opcode, local, localAddress, length, remoteAddress, rkey, counterId, add, signaled, immediate, swap, true,
                solicited);
    }

    /** The same request, whose receive completion at the peer is a solicited event (IBV_SEND_SOLICITED). */
    public WorkRequest solicitedEvent() {
        return new WorkRequest(opcode, local, localAddress, length, remoteAddress, rkey, counterId, add, signaled, immediate, swap, fence,
                true);
    }

    /**
     * The same request without a completion of its own when it succeeds (ibverbs: no
     * {@code IBV_SEND_SIGNALED}). A FETCH_ADD cannot be unsignalled: its result arrives only in its completion.
     */
    public WorkRequest unsignaled() {
        if (opcode == Opcode.FETCH_ADD || opcode == Opcode.COMPARE_SWAP) {
            throw new IllegalArgumentException("a " + opcode + " cannot be unsignalled: its result arrives only in its completion");
        }
        return new WorkRequest(opcode, local, localAddress, length, remoteAddress, rkey, counterId, add, false, immediate, swap, fence,
                solicited);
    }

    /** SEND of [localAddress, +length) into the peer's next posted receive. */
    public static WorkRequest send(MemoryRegion local, long localAddress, int length) {
        return new WorkRequest(Opcode.SEND, local, localAddress, length, 0, 0, 0, 0, true, 0, 0);
    }

    /** A SEND whose receive completion at the peer carries {@code immediate}. */
    public static WorkRequest sendWithImm(MemoryRegion local, long localAddress, int length, int immediate) {
        return new WorkRequest(Opcode.SEND_WITH_IMM, local, localAddress, length, 0, 0, 0, 0, true, immediate, 0);
    }

    /** An RDMA WRITE that then consumes the peer's next posted receive, completing it with {@code immediate}. */
    public static WorkRequest writeWithImm(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey, int immediate) {
        return new WorkRequest(Opcode.WRITE_WITH_IMM, local, localAddress, length, remoteAddress, rkey, 0, 0, true, immediate, 0);
    }

    /**
     * FETCH_ADD on the 8-byte aligned word at the peer's {@code remoteAddress} (little-endian, in a region
     * with REMOTE_ATOMIC); the completion's value is the word before.
     */
    public static WorkRequest fetchAdd(long remoteAddress, long rkey, long add) {
        return new WorkRequest(Opcode.FETCH_ADD, null, 0, 0, remoteAddress, rkey, 0, add, true, 0, 0);
    }

    /** Replaces the peer's 8-byte word at {@code remoteAddress} with {@code swap} if it equals {@code compare}; the completion's value is the word before. */
    public static WorkRequest compareSwap(long remoteAddress, long rkey, long compare, long swap) {
        return new WorkRequest(Opcode.COMPARE_SWAP, null, 0, 0, remoteAddress, rkey, 0, compare, true, 0, swap);
    }

    /** RDMA WRITE of [localAddress, +length) to the peer's [remoteAddress, +length). */
    public static WorkRequest write(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey) {
        return new WorkRequest(Opcode.WRITE, local, localAddress, length, remoteAddress, rkey, 0, 0, true);
    }

    /** A WRITE that then adds one to the peer's event counter {@code counterId}, once the data is visible there. */
    public static WorkRequest writeWithNotify(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey,
            int counterId) {
        return new WorkRequest(Opcode.WRITE_WITH_NOTIFY, local, localAddress, length, remoteAddress, rkey, counterId, 0, true);
    }

    /** RDMA READ of the peer's [remoteAddress, +length) into [localAddress, +length). */
    public static WorkRequest read(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey) {
        return new WorkRequest(Opcode.READ, local, localAddress, length, remoteAddress, rkey, 0, 0, true);
    }

    /** Adds {@code add} to the peer's event counter; the completion's value is the counter before. */
    public static WorkRequest fetchAdd(int counterId, long add) {
        return new WorkRequest(Opcode.FETCH_ADD, null, 0, 0, 0, 0, counterId, add, true);
    }
}
