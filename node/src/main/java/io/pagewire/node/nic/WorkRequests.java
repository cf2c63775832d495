package io.pagewire.node.nic;

import io.pagewire.kernel.KernelConfiguration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;

/**
 * The node's count of outstanding work requests, whole and by owner (application), against its limit
 * ({@code pagewire.quota.workRequestsPerNode}) and each owner's share of it. Striped (a post and its
 * completion run on different threads): the limit is checked against the sum, so concurrent posters may
 * pass it by a few, which is all a bound on the node's heap needs.
 */
final class WorkRequests {
    private final String nodeId;
    private final int limit;
    private final double callerShare;
    private final LongAdder outstanding = new LongAdder();
    private final Map<String, LongAdder> byOwner = new ConcurrentHashMap<>();

    WorkRequests(String nodeId, int limit, double callerShare) {
        this.nodeId = nodeId;
        this.limit = limit;
        this.callerShare = callerShare;
    }

    /** The count of an owner's outstanding work requests, shared by its endpoints; null for no owner. */
    LongAdder of(String owner) {
        return owner == null ? null : byOwner.computeIfAbsent(owner, o -> new LongAdder());
    }

    /** Counts one more outstanding work request against the node's limit and its owner's share of it, or refuses it. */
    void admit(long wrId, String owner, LongAdder ownerCount) {
        if (outstanding.sum() >= limit) {
            throw new QuotaExceededException("work request " + wrId + ": node " + nodeId + " has " + limit
                    + " work requests outstanding, its limit (" + NicConfiguration.WORK_REQUESTS_PER_NODE.name() + "); try again later");
        }
        long share = Math.max(1, (long) (limit * callerShare));
        if (ownerCount != null && ownerCount.sum() >= share) {
            throw new QuotaExceededException("work request " + wrId + ": " + owner + " has " + share + " work requests outstanding on node "
                    + nodeId + ", its share (" + KernelConfiguration.CALLER_SHARE.name() + ") of the node's " + limit + "; reap completions first");
        }
        recount(ownerCount);
    }

    /** Counts one more without the check (a request taken back that is outstanding again). */
    void recount(LongAdder ownerCount) {
        outstanding.increment();
        if (ownerCount != null) {
            ownerCount.increment();
        }
    }

    void retire(int n, LongAdder ownerCount) {
        outstanding.add(-n);
        if (ownerCount != null) {
            ownerCount.add(-n);
        }
    }

    /** Work requests posted on this node and not yet completed (or, for receives, consumed). */
    int outstanding() {
        return (int) outstanding.sum();
    }
}
