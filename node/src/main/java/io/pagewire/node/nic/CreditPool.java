package io.pagewire.node.nic;

/**
 * The node's receive credits: one per system-buffer slot, so that senders holding credits can never
 * overrun the system buffer. A queue pair is granted the few credits one MTU-sized packet needs when it
 * is created and borrows more, up to its full share, as data that spends credits arrives; a pair that
 * never receives into SHADOW pages or posted buffers keeps only the minimum, so a node is not limited to
 * a handful of pairs by credits they never use.
 */
final class CreditPool {
    private final int total;
    private volatile int granted;
    private int holders;

    CreditPool(int total) {
        this.total = total;
    }

    /** Grants a new queue pair its first credits, or refuses the pair when the buffer cannot hold even those. */
    synchronized void reserve(int credits) {
        if (granted + credits > total) {
            throw new QuotaExceededException("no receive credits left for a new queue pair: " + granted + " of " + total
                    + " system-buffer slots are granted to " + holders + " queue pairs; raise pagewire.kernel.systemBufferBytes");
        }
        granted += credits;
        holders++;
    }

    /** Lends a queue pair up to {@code wanted} more credits: as many as are free, perhaps none. */
    int lend(int wanted) {
        if (wanted <= 0 || granted >= total) { // racy read: a miss only means the next packet asks again
            return 0;
        }
        synchronized (this) {
            int lent = Math.min(wanted, total - granted);
            granted += lent;
            return lent;
        }
    }

    /** A queue pair that can receive no more gives back everything it was granted. */
    synchronized void release(int credits) {
        granted -= credits;
        holders--;
    }

    synchronized int granted() {
        return granted;
    }

    int total() {
        return total;
    }
}
