package io.pagewire.node.nic;

import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.function.BooleanSupplier;
import java.util.function.IntPredicate;

/**
 * The NIC's translation look-aside buffer: a set-associative cache from (address space, virtual page)
 * to (frame, generation), held in primitive arrays so that a hit is a short scan of one set.
 *
 * <p>A miss fills a slot in two steps: {@link #reserve} picks the slot (evicting its entry, whose pin
 * the caller then releases) and marks it reserved; the caller asks the kernel for the translation
 * without any NIC lock held; {@link #fill} installs it only if no invalidation touched the page
 * meanwhile (the reservation is cancelled by {@link #invalidate}, and the translation's sequence is
 * checked). So every pin a PIN_ON_MISS entry holds is accounted to exactly one slot, and a
 * translation that raced with an invalidation is never cached.
 */
final class Tlb {
    /** What {@link #lookup} returns on a miss. */
    static final long MISS = -1L;

    private static final long EMPTY = -1L;
    private static final byte FREE = 0;
    private static final byte VALID = 1;
    private static final byte RESERVED = 2;
    private static final byte CANCELLED = 3;

    private final int ways;
    private final int sets;
    private final TlbReplacement replacement;
    private final TlbIndexing indexing;
    private final SplittableRandom random;
    private final long[] keys;
    private final byte[] states;
    private final int[] frames;
    private final int[] generations;
    private final boolean[] pinned;
    private final long[] stamps;
    private long tick;
    private int pinnedEntries;

    Tlb(int entries, int ways, TlbReplacement replacement, TlbIndexing indexing, long seed) {
        this.ways = ways;
        this.sets = entries / ways;
        this.replacement = replacement;
        this.indexing = indexing;
        this.random = new SplittableRandom(seed);
        this.keys = new long[entries];
        this.states = new byte[entries];
        this.frames = new int[entries];
        this.generations = new int[entries];
        this.pinned = new boolean[entries];
        this.stamps = new long[entries];
        Arrays.fill(keys, EMPTY);
    }

    /** Packs an address space id and a virtual page number into one key (a 48-bit address space has < 2^40 pages). */
    static long key(int spaceId, long vpn) {
        return ((long) spaceId << 40) | vpn;
    }

    /** The virtual page number's bits of a {@link #key}. */
    private static final long VPN_MASK = (1L << 40) - 1;

    static int frameOf(long translation) {
        return (int) translation;
    }

    static int generationOf(long translation) {
        return (int) (translation >>> 32);
    }

    static long pack(int frame, int generation) {
        return ((long) generation << 32) | (frame & 0xFFFFFFFFL);
    }

    int entries() {
        return keys.length;
    }

    /**
     * The translation for a page, packed by {@link #pack}, or {@link #MISS}.
     *
     * @param needPin only an entry holding a pin counts as a hit (PIN_ON_MISS)
     */
    synchronized long lookup(long key, boolean needPin) {
        int base = setBase(key);
        for (int slot = base; slot < base + ways; slot++) {
            if (keys[slot] == key && states[slot] == VALID) {
                if (needPin && !pinned[slot]) {
                    return MISS;
                }
                if (replacement == TlbReplacement.LRU) {
                    stamps[slot] = ++tick;
                }
                return pack(frames[slot], generations[slot]);
            }
        }
        return MISS;
    }

    /**
     * Picks and reserves a slot for a page in its set, evicting the entry there.
     *
     * @return null when every way of the set is reserved by other misses in progress
     */
    synchronized Reservation reserve(long key) {
        int base = setBase(key);
        int chosen = -1;
        for (int slot = base; slot < base + ways; slot++) {
            if (states[slot] == FREE) {
                chosen = slot;
                break;
            }
        }
        if (chosen < 0) {
            chosen = victim(base);
            if (chosen < 0) {
                return null;
            }
        }
        long evictedKey = EMPTY;
        boolean evictedPinned = false;
        if (states[chosen] == VALID) {
            evictedKey = keys[chosen];
            evictedPinned = pinned[chosen];
        }
        if (pinned[chosen]) {
            pinnedEntries--;
        }
        keys[chosen] = key;
        states[chosen] = RESERVED;
        pinned[chosen] = false;
        return new Reservation(chosen, key, evictedKey, evictedPinned);
    }

    /**
     * Installs a translation in a reserved slot, unless an invalidation cancelled the reservation.
     *
     * @param current whether the kernel's invalidation sequence still matches the translation's;
     *     evaluated under this lock, which the invalidation callback also takes
     * @return false when the translation must not be used (the caller releases any pin it took)
     */
    synchronized boolean fill(Reservation r, int frame, int generation, boolean withPin, BooleanSupplier current) {
        int slot = r.slot();
        if (keys[slot] != r.key() || states[slot] != RESERVED || !current.getAsBoolean()) {
            if (keys[slot] == r.key() && (states[slot] == RESERVED || states[slot] == CANCELLED)) {
                clear(slot);
            }
            return false;
        }
        states[slot] = VALID;
        frames[slot] = frame;
        generations[slot] = generation;
        pinned[slot] = withPin;
        if (withPin) {
            pinnedEntries++;
        }
        stamps[slot] = ++tick;
        return true;
    }

    /** Gives up a reservation (the kernel refused the page). */
    synchronized void cancel(Reservation r) {
        if (keys[r.slot()] == r.key() && states[r.slot()] != VALID) {
            clear(r.slot());
        }
    }

    /**
     * Drops every entry of pages [firstVpn, firstVpn + count) of an address space, and cancels
     * reservations for them.
     */
    synchronized Invalidated invalidate(int spaceId, long firstVpn, long count) {
        long firstKey = key(spaceId, firstVpn);
        long endKey = firstKey + count;
        Invalidated result = new Invalidated();
        if (count <= keys.length) {
            for (long k = firstKey; k < endKey; k++) {
                int base = setBase(k);
                for (int slot = base; slot < base + ways; slot++) {
                    if (keys[slot] == k) {
                        drop(slot, result);
                    }
                }
            }
        } else {
            for (int slot = 0; slot < keys.length; slot++) {
                if (keys[slot] >= firstKey && keys[slot] < endKey) {
                    drop(slot, result);
                }
            }
        }
        return result;
    }

    /** Drops an entry whose frame turned out to be reclaimed (the DMA lock refused it). */
    synchronized void dropStale(long key, long translation) {
        int base = setBase(key);
        for (int slot = base; slot < base + ways; slot++) {
            if (keys[slot] == key && states[slot] == VALID && pack(frames[slot], generations[slot]) == translation) {
                if (pinned[slot]) {
                    // A pinned frame is never reclaimed while pinned; keep the pin accounting honest anyway.
                    pinnedEntries--;
                }
                clear(slot);
            }
        }
    }

    /** Entries that hold a pin now (PIN_ON_MISS), never more than the entries. */
    synchronized int pinnedEntries() {
        return pinnedEntries;
    }

    synchronized int validEntries() {
        int n = 0;
        for (byte state : states) {
            if (state == VALID) {
                n++;
            }
        }
        return n;
    }

    private void drop(int slot, Invalidated result) {
        if (states[slot] == RESERVED) {
            states[slot] = CANCELLED;
            return;
        }
        if (states[slot] != VALID) {
            return;
        }
        result.dropped++;
        if (pinned[slot]) {
            result.addPinned(keys[slot]);
            pinnedEntries--;
        }
        clear(slot);
    }

    /**
     * Drops the least recently used entry that holds a pin, anywhere in the TLB (of one address space,
     * or of any when {@code spaceId} is negative), so that its pin can be given back: PIN_ON_MISS met the
     * kernel's pin limit.
     *
     * @return the dropped entry's key, whose pin the caller releases, or {@code -1} when none holds a pin
     */
    synchronized long dropOldestPinned(IntPredicate ofSpace) {
        int best = -1;
        for (int slot = 0; slot < keys.length; slot++) {
            if (states[slot] == VALID && pinned[slot] && ofSpace.test((int) (keys[slot] >>> 40))
                    && (best < 0 || stamps[slot] < stamps[best])) {
                best = slot;
            }
        }
        if (best < 0) {
            return EMPTY;
        }
        long key = keys[best];
        pinnedEntries--;
        clear(best);
        return key;
    }

    private void clear(int slot) {
        keys[slot] = EMPTY;
        states[slot] = FREE;
        pinned[slot] = false;
    }

    /** A VALID slot of the set to replace, or -1 if all are reserved. */
    private int victim(int base) {
        if (replacement == TlbReplacement.RANDOM) {
            int start = random.nextInt(ways);
            for (int i = 0; i < ways; i++) {
                int slot = base + (start + i) % ways;
                if (states[slot] == VALID) {
                    return slot;
                }
            }
            return -1;
        }
        int best = -1;
        for (int slot = base; slot < base + ways; slot++) {
            if (states[slot] == VALID && (best < 0 || stamps[slot] < stamps[best])) {
                best = slot;
            }
        }
        return best;
    }

    private int setBase(long key) {
        if (sets == 1) {
            return 0;
        }
        if (indexing == TlbIndexing.LOW_BITS) {
            return (int) Long.remainderUnsigned(key & VPN_MASK, sets) * ways;
        }
        long mixed = key * 0x9E3779B97F4A7C15L;
        return (int) Long.remainderUnsigned(mixed ^ (mixed >>> 29), sets) * ways;
    }

    /** What an invalidation dropped: how many entries, and the keys of those that held pins. */
    static final class Invalidated {
        int dropped;
        long[] pinnedKeys = new long[0];
        int pinnedCount;

        void addPinned(long key) {
            if (pinnedCount == pinnedKeys.length) {
                pinnedKeys = Arrays.copyOf(pinnedKeys, Math.max(4, pinnedCount * 2));
            }
            pinnedKeys[pinnedCount++] = key;
        }
    }

    /** A slot reserved for a page by a miss, and what was evicted from it. */
    record Reservation(int slot, long key, long evictedKey, boolean evictedPinned) {
        boolean evicted() {
            return evictedKey != EMPTY;
        }
    }
}
