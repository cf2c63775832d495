package io.pagewire.node.nic;

import java.security.SecureRandom;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * What registration made, by key: every endpoint's memory regions by rkey and memory windows by index
 * (what a peer's rkey names), the keys themselves, and what each registration mode does with a region's
 * pages. Endpoints publish here; responders look up here.
 */
final class Regions {
    private static final long RKEY_MODE_MASK = 3L;
    /** values() copies its array on every call; the per-packet path reads this one. */
    private static final RegistrationMode[] MODES = RegistrationMode.values();

    private final String nodeId;
    private final Map<Long, MemoryRegion> regionsByRkey = new ConcurrentHashMap<>();
    /** Memory windows of every endpoint, by index: what a window rkey names. */
    private final Map<Integer, MemoryWindow> windowsByIndex = new ConcurrentHashMap<>();
    private final AtomicInteger nextWindowIndex = new AtomicInteger(1);
    private final SecureRandom keys = new SecureRandom();
    /** What each registration mode does with a region's pages, by the mode's ordinal. */
    private final RegionPolicy[] policies;

    Regions(String nodeId, RegionPolicy... policies) {
        this.nodeId = nodeId;
        this.policies = policies.clone();
        for (RegistrationMode mode : MODES) {
            if (this.policies[mode.ordinal()].mode() != mode) {
                throw new IllegalArgumentException("policy " + mode.ordinal() + " is " + this.policies[mode.ordinal()].mode() + ", not " + mode);
            }
        }
    }

    /** What a registration mode does with a region's pages. */
    RegionPolicy policy(RegistrationMode mode) {
        return policies[mode.ordinal()];
    }

    /**
     * A fresh rkey: 32 bits, as verbs programs carry them ({@code ibv_mr.rkey}): 30 random bits, and in
     * the low two bits the region's registration mode (as a real NIC's keys carry index bits), so a
     * requester knows which writes may park in the system buffer and must spend credits.
     */
    long newRkey(RegistrationMode mode) {
        while (true) {
            // Bit 31 stays clear: it marks a memory window's rkey.
            long rkey = (Integer.toUnsignedLong(keys.nextInt()) & ~RKEY_MODE_MASK & ~MemoryWindow.RKEY_BIT) | mode.ordinal();
            if ((rkey & ~RKEY_MODE_MASK) != 0 && !regionsByRkey.containsKey(rkey)) {
                return rkey;
            }
        }
    }

    void publish(MemoryRegion region) {
        regionsByRkey.put(region.rkey(), region);
    }

    void unpublish(MemoryRegion region) {
        regionsByRkey.remove(region.rkey(), region);
    }

    MemoryRegion regionByRkey(long rkey) {
        return regionsByRkey.get(rkey);
    }

    /** A fresh window of {@code endpoint}'s, under a new index (23 bits, then the key's 8). */
    MemoryWindow allocateWindow(Endpoint endpoint, MemoryWindow.Type type) {
        for (int tries = 0; tries < (1 << 23); tries++) {
            int index = nextWindowIndex.getAndUpdate(i -> i + 1 >= (1 << 23) ? 1 : i + 1);
            MemoryWindow window = new MemoryWindow(endpoint, type, index);
            if (windowsByIndex.putIfAbsent(index, window) == null) {
                return window;
            }
        }
        throw new QuotaExceededException("node " + nodeId + " has every memory window index in use");
    }

    void forget(MemoryWindow window) {
        windowsByIndex.remove(MemoryWindow.indexOf(window.rkey()), window);
    }

    /** The window a window rkey names (whatever its key), or null. */
    MemoryWindow windowByRkey(long rkey) {
        return windowsByIndex.get(MemoryWindow.indexOf(rkey));
    }

    /** Whether an rkey names a memory window rather than a region. */
    static boolean isWindowRkey(long rkey) {
        return (rkey & MemoryWindow.RKEY_BIT) != 0;
    }

    /** The registration mode a region's rkey names in its low bits. */
    static RegistrationMode modeOfRkey(long rkey) {
        return MODES[(int) (rkey & RKEY_MODE_MASK)];
    }
}
