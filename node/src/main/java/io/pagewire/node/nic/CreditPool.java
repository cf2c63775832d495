package io.pagewire.node.nic;

import io.pagewire.kernel.KernelConfiguration;
import java.util.HashMap;
import java.util.Map;

/**
 * The node's receive credits: one per system-buffer slot, so that senders holding credits can never
 * overrun the system buffer. A queue pair is granted the few credits one MTU-sized packet needs when it
 * is created and borrows more, up to its full share, as data that spends credits arrives; a pair that
 * never receives into SHADOW pages or posted buffers keeps only the minimum, so a node is not limited to
 * a handful of pairs by credits they never use. No one application (owner) holds more than its share
 * of the pool ({@code pagewire.quota.callerShare}), so another's new queue pairs still get credits.
 */
final class CreditPool {
    private final int total;
    private final int ownerLimit;
    /** What loans may take an owner to: its share less a quarter kept for the first grants of its new pairs. */
    private final int ownerLoanLimit;
    private volatile int granted;
    private int holders;
    /** Credits granted to each owner's queue pairs. Guarded by this. */
    private final Map<String, Integer> byOwner = new HashMap<>();

    CreditPool(int total, double ownerShare) {
        this.total = total;
        this.ownerLimit = Math.max(1, (int) (total * ownerShare));
        this.ownerLoanLimit = ownerLimit - ownerLimit / 4;
    }

    /**
     * Grants a new queue pair of {@code owner} its first credits, or refuses the pair when the buffer,
     * or the owner's share of it, cannot hold even those.
     */
    synchronized void reserve(String owner, int credits) {
        if (granted + credits > total) {
            throw new QuotaExceededException("no receive credits left for a new queue pair: " + granted + " of " + total
                    + " system-buffer slots are granted to " + holders + " queue pairs; raise pagewire.kernel.systemBufferBytes");
        }
        int held = owner == null ? 0 : byOwner.getOrDefault(owner, 0);
        if (owner != null && held + credits > ownerLimit) {
            throw new QuotaExceededException("no receive credits left for a new queue pair of " + owner + ": its queue pairs hold " + held
                    + " of the node's " + total + " system-buffer slots, its share (" + KernelConfiguration.CALLER_SHARE.name() + ")");
        }
        granted += credits;
        if (owner != null) {
            byOwner.put(owner, held + credits);
        }
        holders++;
    }

    /** Lends a queue pair of {@code owner} (null: none, bounded by the pool alone) up to {@code wanted} more credits: as many as are free within its share, perhaps none. */
    int lend(String owner, int wanted) {
        if (wanted <= 0 || granted >= total) { // racy read: a miss only means the next packet asks again
            return 0;
        }
        synchronized (this) {
            if (owner == null) {
                int lent = Math.min(wanted, total - granted);
                granted += lent;
                return lent;
            }
            int held = byOwner.getOrDefault(owner, 0);
            int lent = Math.max(0, Math.min(wanted, Math.min(total - granted, ownerLoanLimit - held)));
            granted += lent;
            byOwner.put(owner, held + lent);
            return lent;
        }
    }

    /** A queue pair that can receive no more gives back everything it was granted. */
    synchronized void release(String owner, int credits) {
        granted -= credits;
        holders--;
        if (owner == null) {
            return;
        }
        int left = byOwner.getOrDefault(owner, 0) - credits;
        if (left <= 0) {
            byOwner.remove(owner);
        } else {
            byOwner.put(owner, left);
        }
    }

    synchronized int granted() {
        return granted;
    }

    /** Credits granted to the queue pairs of one owner. */
    synchronized int granted(String owner) {
        return byOwner.getOrDefault(owner, 0);
    }

    int total() {
        return total;
    }
}
