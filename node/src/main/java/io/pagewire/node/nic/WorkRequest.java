package io.pagewire.node.nic;

import java.util.List;

/**
 * One operation posted to a queue pair, after {@code ibv_send_wr}. {@code wrId} is the caller's tag,
 * returned in the completion. Local memory is a list of {@link Segment}s, remote memory (rkey,
 * address), event counters on the peer's endpoint by id. An unsignalled request ({@code signaled}
 * false, ibverbs' work request without {@code IBV_SEND_SIGNALED}) puts no completion on the queue
 * when it succeeds; a failed one always does, and so does an atomic without a local buffer, whose
 * result then travels only in its completion (with one, the word lands there before the completion). {@code immediate} is what SEND_WITH_IMM and WRITE_WITH_IMM deliver in the peer's
 * receive completion. {@code add} is ibverbs' {@code compare_add}: what FETCH_ADD adds, what
 * COMPARE_SWAP compares the word with; {@code swap} is what COMPARE_SWAP stores when they are equal.
 */
public record WorkRequest(long wrId, Completion.Opcode opcode, List<Segment> segments, int length, long remoteAddress, long rkey,
        int counterId, long add, boolean signaled, int immediate, long swap, boolean fence, boolean solicited, Datagram datagram) {

    /**
     * The canonical form: {@code segments} is the gather list (SEND, WRITE) or scatter list (READ, an
     * atomic's 8-byte result), {@code length} their sum. {@code fence} holds the request back until every
     * READ and atomic before it finished (IBV_SEND_FENCE); {@code solicited} asks the receiver's completion
     * to wake a CQ armed for solicited events only (IBV_SEND_SOLICITED).
     */
    public WorkRequest {
        if (opcode == Completion.Opcode.RECV || opcode == Completion.Opcode.RECV_RDMA_WITH_IMM) {
            throw new IllegalArgumentException(opcode + " is a receive completion, not a work request; post a ReceiveRequest");
        }
        segments = List.copyOf(segments);
        long sum = 0;
        for (Segment s : segments) {
            sum += s.length();
        }
        if (sum != length) {
            throw new NicException("work request " + wrId + ": its length " + length + " is not the sum of its scatter/gather elements' ("
                    + sum + ")");
        }
        // An atomic with no buffer of its own for the word it fetched reports the word in its completion only.
        signaled |= (opcode == Completion.Opcode.FETCH_ADD || opcode == Completion.Opcode.COMPARE_SWAP) && segments.isEmpty();
    }

    /** A request of a connected pair (no datagram destination). */
    public WorkRequest(long wrId, Completion.Opcode opcode, List<Segment> segments, int length, long remoteAddress, long rkey,
            int counterId, long add, boolean signaled, int immediate, long swap, boolean fence, boolean solicited) {
        this(wrId, opcode, segments, length, remoteAddress, rkey, counterId, add, signaled, immediate, swap, fence, solicited, null);
    }

    /** One local range (none when {@code length} is 0 and {@code lkey} is 0), as before scatter/gather lists. */
    public WorkRequest(long wrId, Completion.Opcode opcode, int lkey, long localAddress, int length,
            long remoteAddress, long rkey, int counterId, long add, boolean signaled, int immediate, long swap) {
        this(wrId, opcode, one(lkey, localAddress, length), length, remoteAddress, rkey, counterId, add, signaled, immediate, swap, false,
                false);
    }

    public WorkRequest(long wrId, Completion.Opcode opcode, int lkey, long localAddress, int length,
            long remoteAddress, long rkey, int counterId, long add, boolean signaled) {
        this(wrId, opcode, lkey, localAddress, length, remoteAddress, rkey, counterId, add, signaled, 0, 0);
    }

    private static List<Segment> one(int lkey, long localAddress, int length) {
        return lkey == 0 && length == 0 ? List.of() : List.of(new Segment(lkey, localAddress, length));
    }

    /** The sum of {@code segments}' lengths, or a NicException when it does not fit a message. */
    public static int lengthOf(long wrId, List<Segment> segments) {
        long sum = 0;
        for (Segment s : segments) {
            sum += s.length();
        }
        if (sum > Integer.MAX_VALUE) {
            throw new NicException("work request " + wrId + ": its scatter/gather elements add up to " + sum + " bytes, more than a message holds");
        }
        return (int) sum;
    }

    /** The first element's lkey, or 0 when there is none. */
    public int lkey() {
        return segments.isEmpty() ? 0 : segments.get(0).lkey();
    }

    /** The first element's address, or 0 when there is none. */
    public long localAddress() {
        return segments.isEmpty() ? 0 : segments.get(0).address();
    }

    /** The same request, completing silently when it succeeds. */
    public WorkRequest unsignaled() {
        return new WorkRequest(wrId, opcode, segments, length, remoteAddress, rkey, counterId, add, false, immediate, swap, fence, solicited, datagram);
    }

    /** The same request, held back until every READ and atomic before it finished (IBV_SEND_FENCE). */
    public WorkRequest fenced() {
        return new WorkRequest(wrId, opcode, segments, length, remoteAddress, rkey, counterId, add, signaled, immediate, swap, true, solicited, datagram);
    }

    /** The same request, whose receive completion wakes a CQ armed for solicited events (IBV_SEND_SOLICITED). */
    public WorkRequest solicitedEvent() {
        return new WorkRequest(wrId, opcode, segments, length, remoteAddress, rkey, counterId, add, signaled, immediate, swap, fence, true, datagram);
    }

    /** The same request gathering from (or scattering into) {@code elements} instead. */
    public WorkRequest withSegments(List<Segment> elements) {
        return new WorkRequest(wrId, opcode, elements, lengthOf(wrId, elements), remoteAddress, rkey, counterId, add, signaled, immediate,
                swap, fence, solicited, datagram);
    }

    /** The same request, a UD SEND to {@code destination}. */
    public WorkRequest to(Datagram destination) {
        return new WorkRequest(wrId, opcode, segments, length, remoteAddress, rkey, counterId, add, signaled, immediate, swap, fence, solicited,
                destination);
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
        return opcode == Completion.Opcode.SEND || opcode == Completion.Opcode.SEND_WITH_IMM || opcode == Completion.Opcode.SEND_WITH_INVALIDATE;
    }

    /** Whether this request runs on this node alone (a memory window's bind or invalidation): no packet goes out. */
    public boolean isLocal() {
        return opcode == Completion.Opcode.BIND_WINDOW || opcode == Completion.Opcode.LOCAL_INVALIDATE;
    }

    /** Binds window {@code rkey} (index and new key) to [address, +length) of region {@code lkey} with {@code access}. */
    public static WorkRequest bindWindow(long wrId, long rkey, int lkey, long address, long length, java.util.Set<Access> access) {
        return new WorkRequest(wrId, Completion.Opcode.BIND_WINDOW, List.of(), 0, address, rkey, lkey, length, true, 0, Access.mask(access),
                false, false);
    }

    /** Invalidates type 2 window {@code rkey} of the requester's endpoint. */
    public static WorkRequest localInvalidate(long wrId, long rkey) {
        return new WorkRequest(wrId, Completion.Opcode.LOCAL_INVALIDATE, List.of(), 0, 0, rkey, 0, 0, true, 0, 0, false, false);
    }

    /** A SEND that then invalidates the peer's type 2 window {@code invalidateRkey}. */
    public static WorkRequest sendWithInvalidate(long wrId, int lkey, long localAddress, int length, long invalidateRkey) {
        return new WorkRequest(wrId, Completion.Opcode.SEND_WITH_INVALIDATE, lkey, localAddress, length, 0, 0, 0, 0, true,
                (int) invalidateRkey, 0);
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
