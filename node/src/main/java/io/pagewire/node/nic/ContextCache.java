package io.pagewire.node.nic;

import io.pagewire.kernel.ModelledWait;
import java.util.Arrays;

/**
 * The NIC's on-chip cache of connection and region state (ScalaRNIC, Husky/Harmonic): a queue pair's
 * context is read for every packet it sends or receives, a region's for every request that names its
 * key, and a context not cached is fetched from host memory first, over PCIe. Set-associative with
 * LRU replacement, like the TLB; a miss costs {@code missNs} of the NIC's time, spent busy on the
 * thread that processes the packet (the NIC's pipeline waits for the fetch). With no entries
 * (the default) every context is on the chip and nothing is modelled.
 */
final class ContextCache {
    /** What a context describes: the meters count each kind apart. */
    enum Kind {
        QUEUE_PAIR,
        REGION
    }

    private static final long EMPTY = -1L;

    private final int ways;
    private final int sets;
    private final long missNs;
    private final NicCounters counters;
    /** Per set, its ways' keys, most recently used first. */
    private final long[][] keys;

    ContextCache(int entries, int ways, long missNs, NicCounters counters) {
        this.ways = entries == 0 ? 0 : ways;
        this.sets = entries == 0 ? 0 : entries / ways;
        this.missNs = missNs;
        this.counters = counters;
        this.keys = new long[sets][];
        for (int s = 0; s < sets; s++) {
            keys[s] = new long[ways];
            Arrays.fill(keys[s], EMPTY);
        }
    }

    /** Whether {@code entries} (0: no cache) divide into sets of {@code ways}: what the settings and a resize both require. */
    static boolean shapeFits(int entries, int ways) {
        return entries == 0 || (ways >= 1 && ways <= entries && entries % ways == 0);
    }

    int entries() {
        return sets * ways;
    }

    boolean enabled() {
        return sets > 0;
    }

    /** The NIC reads the context of {@code id} (a queue pair number, a region's key): a hit, or a miss that fetches it. */
    void read(Kind kind, long id) {
        if (sets == 0) {
            return;
        }
        long key = ((long) kind.ordinal() << 40) | (id & 0xFF_FFFF_FFFFL);
        long[] set = keys[setOf(key)];
        boolean hit;
        synchronized (set) {
            int way = 0;
            while (way < ways && set[way] != key) {
                way++;
            }
            hit = way < ways;
            // Most recently used first: the way found (or, on a miss, the last, which LRU evicts) moves to the front.
            System.arraycopy(set, 0, set, 1, Math.min(way, ways - 1));
            set[0] = key;
        }
        counters.increment(kind == Kind.QUEUE_PAIR ? (hit ? NicCounter.CONTEXT_QP_HITS : NicCounter.CONTEXT_QP_MISSES)
                : (hit ? NicCounter.CONTEXT_REGION_HITS : NicCounter.CONTEXT_REGION_MISSES));
        if (!hit) {
            ModelledWait.busyFor(missNs);
        }
    }

    private int setOf(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) ((h >>> 32) % sets);
    }
}
