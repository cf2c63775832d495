package io.pagewire.node.nic;

import java.util.NavigableSet;
import java.util.concurrent.ConcurrentSkipListSet;

/**
 * The pages an ON_DEMAND NIC may translate, as mlx5's driver keeps them in the device's page table
 * (the MTT of an ODP region): filled by the NIC's page faults and by prefetch, and at registration
 * with the pages already resident (mlx5's snapshot); emptied by the kernel's invalidations. A page that
 * is resident yet not here costs a NIC page fault (a minor one), as it does on such a NIC, which cannot
 * walk the host's page tables itself. Keyed as the TLB is ({@link Tlb#key}), so one endpoint's pages
 * are one range.
 */
final class OnDemandPageTable {
    private final NavigableSet<Long> mapped = new ConcurrentSkipListSet<>();

    boolean maps(int spaceId, long vpn) {
        return mapped.contains(Tlb.key(spaceId, vpn));
    }

    void map(int spaceId, long vpn) {
        mapped.add(Tlb.key(spaceId, vpn));
    }

    /** Drops [firstVpn, firstVpn + pages) of one address space. */
    void invalidate(int spaceId, long firstVpn, long pages) {
        if (pages <= 0) {
            return;
        }
        long first = Tlb.key(spaceId, firstVpn);
        long end = Tlb.key(spaceId, Math.min(firstVpn + pages, 1L << 40));
        if (pages == 1) {
            mapped.remove(first);
        } else {
            mapped.subSet(first, true, end, false).clear();
        }
    }

    /** Drops every page of one address space (its implicit region went, or the endpoint closed). */
    void invalidateAll(int spaceId) {
        mapped.subSet(Tlb.key(spaceId, 0), true, Tlb.key(spaceId + 1, 0), false).clear();
    }

    /** How many pages are mapped (a meter). */
    int size() {
        return mapped.size();
    }
}
