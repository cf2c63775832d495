package io.pagewire.node.nic;

/**
 * The node's receive credits: one per system-buffer slot. Each queue pair is granted its share when it
 * is created, so that senders holding credits can never overrun the system buffer.
 */
final class CreditPool {
    private final int total;
    private int granted;
    private int holders;

    CreditPool(int total) {
        this.total = total;
    }

    synchronized void reserve(int credits) {
        if (granted + credits > total) {
            throw new NicException("no receive credits left for a new queue pair: " + granted + " of " + total
                    + " system-buffer slots are granted to " + holders + " queue pairs; raise pagewire.kernel.systemBufferBytes"
                    + " or lower pagewire.nic.creditsPerQp");
        }
        granted += credits;
        holders++;
    }

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
