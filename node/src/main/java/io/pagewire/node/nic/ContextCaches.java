package io.pagewire.node.nic;

/**
 * The NIC's context cache as it is now: an experiment may replace it whole while the node runs
 * (the NIC's contextCache), so parts look it up through this holder at each use.
 */
final class ContextCaches {
    private volatile ContextCache current;

    ContextCaches(ContextCache first) {
        this.current = first;
    }

    ContextCache current() {
        return current;
    }

    void replace(ContextCache next) {
        current = next;
    }

    /** A read of a queue pair's or a region's context: a hit, or a miss that costs its fetch. */
    void read(ContextCache.Kind kind, long key) {
        current.read(kind, key);
    }
}
