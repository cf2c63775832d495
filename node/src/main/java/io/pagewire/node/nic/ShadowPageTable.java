package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.Translation;
import org.agrona.collections.Long2LongHashMap;

/**
 * NetVM's shadow page table: the NIC's copy of the translations of every resident page of SHADOW
 * regions, kept by the kernel agent's map and invalidate events rather than filled on misses. A page
 * missing from it is not resident, so a receive into it goes to the system buffer.
 */
final class ShadowPageTable {
    static final long ABSENT = -1L;

    private final Long2LongHashMap entries = new Long2LongHashMap(ABSENT);

    synchronized long lookup(long key) {
        return entries.get(key);
    }

    /** Records a mapping reported by the kernel (its map callback, under the kernel lock). */
    synchronized void map(long key, Translation t) {
        entries.put(key, Tlb.pack(t.frame(), t.generation()));
    }

    /** Records a translation read at registration, unless an invalidation overtook it. */
    synchronized void populate(AddressSpace space, long key, Translation t) {
        if (space.isCurrent(t)) {
            entries.put(key, Tlb.pack(t.frame(), t.generation()));
        }
    }

    /** Forgets pages [firstVpn, firstVpn + count) of a space; returns how many entries went. */
    synchronized int invalidate(int spaceId, long firstVpn, long count) {
        long firstKey = Tlb.key(spaceId, firstVpn);
        long endKey = firstKey + count;
        int removed = 0;
        if (count <= entries.size()) {
            for (long k = firstKey; k < endKey; k++) {
                if (entries.remove(k) != ABSENT) {
                    removed++;
                }
            }
        } else {
            Long2LongHashMap.KeyIterator it = entries.keySet().iterator();
            while (it.hasNext()) {
                long k = it.nextValue();
                if (k >= firstKey && k < endKey) {
                    it.remove();
                    removed++;
                }
            }
        }
        return removed;
    }

    synchronized void dropStale(long key, long translation) {
        if (entries.get(key) == translation) {
            entries.remove(key);
        }
    }

    synchronized int size() {
        return entries.size();
    }
}
