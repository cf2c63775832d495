package io.pagewire.node.nic;

import java.util.BitSet;

/**
 * A posted work request on its way: the packet sequence numbers it occupies and, for a READ, which
 * responses have arrived; for a FETCH_ADD, the result.
 */
final class SendWqe {
    final WorkRequest wr;
    /**
     * The region of each of the request's elements (WRITE and SEND sources, READ destinations, an
     * atomic's result buffer); null for a zero-length element. Empty when the request has none.
     */
    final MemoryRegion[] regions;
    final long psnFirst;
    /** When the request was posted, for its latency. */
    final long postedNs;
    /** PSNs the request occupies: one per packet of a WRITE, one per response of a READ, one for FETCH_ADD. */
    final int packets;
    /** READ: responses received, by index. */
    final BitSet responses;
    /**
     * READ: responses dropped because their local page was not resident, to be asked for again once it
     * is; made at the first such drop (most READs never fault).
     */
    BitSet refetch;
    int responsesReceived;
    /**
     * Requests that ran on this node when they were posted after this one (a window's bind or
     * invalidation), completed in their place once this one completes; null when there are none.
     */
    java.util.List<LocalOperation> localAfter;

    /** A request that ran on this node at posting: how it ended, to report in its place in the send queue. */
    record LocalOperation(WorkRequest wr, CompletionStatus status, String error) {
    }

    /**
     * A SEND: whether its segments spend credits, fixed at its first segment's first transmission (see
     * {@link Credits#sendsSpend}), so that every transmission of a segment claims the same.
     */
    boolean sendSpendsCredits;
    /** An atomic's answer arrived (its result is in {@link #atomicResult}). */
    boolean atomicDone;
    /** An atomic's result is in its local buffer (or it has none): it may complete. */
    boolean atomicPlaced;
    long atomicResult;

    SendWqe(WorkRequest wr, MemoryRegion[] regions, long psnFirst, int packets, long postedNs) {
        this.wr = wr;
        this.postedNs = postedNs;
        this.regions = regions;
        this.psnFirst = psnFirst;
        this.packets = packets;
        this.responses = wr.opcode() == Completion.Opcode.READ ? new BitSet(packets) : null;
    }

    long psnLast() {
        return psnFirst + packets - 1;
    }

    boolean contains(long psn) {
        return psn >= psnFirst && psn <= psnLast();
    }

    /** The region of the first element that names memory, or null: whose registration mode the request's latency is counted under. */
    MemoryRegion firstRegion() {
        for (MemoryRegion r : regions) {
            if (r != null) {
                return r;
            }
        }
        return null;
    }

    /** Whether this request waits for the READs and atomics before it (IBV_SEND_FENCE). */
    boolean fenced() {
        return wr.fence();
    }

    boolean isRead() {
        return wr.opcode() == Completion.Opcode.READ;
    }

    boolean isAtomic() {
        return wr.isAtomic();
    }

    /** Whether this request is finished, given every PSN up to {@code ackedThrough} was acknowledged. */
    boolean done(long ackedThrough) {
        if (isRead()) {
            return responsesReceived == packets;
        }
        if (isAtomic()) {
            return atomicDone && atomicPlaced;
        }
        return ackedThrough >= psnLast();
    }

    /** The first PSN of this request not yet acknowledged or answered. */
    long firstUnacked(long ackedThrough) {
        if (isRead()) {
            return psnFirst + responses.nextClearBit(0);
        }
        if (isAtomic()) {
            return psnFirst;
        }
        return Math.max(psnFirst, ackedThrough + 1);
    }
}
