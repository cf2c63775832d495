package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.Translation;

/**
 * ON_DEMAND (NIC on-demand paging): translations live in the TLB without pins. A miss walks the
 * kernel's page table; a resident page is cached (unless an invalidation raced with the walk), a
 * non-resident one is left to the caller to fault in asynchronously. Kernel invalidations drop
 * entries.
 */
final class OnDemandTranslator implements Translator {
    private final Nic nic;
    private final Tlb tlb;
    private final NicCounters counters;

    OnDemandTranslator(Nic nic) {
        this.nic = nic;
        this.tlb = nic.tlb();
        this.counters = nic.counters();
    }

    @Override
    public long lookup(MemoryRegion region, long vpn) {
        long t = tlb.lookup(Tlb.key(region.endpoint().id(), vpn), false);
        counters.increment(t == Tlb.MISS ? NicCounter.TLB_MISSES : NicCounter.TLB_HITS, RegistrationMode.ON_DEMAND);
        return t;
    }

    @Override
    public long resolve(MemoryRegion region, long vpn, boolean write, Side side) {
        AddressSpace space = region.endpoint().space();
        Translation t = space.translate(vpn);
        if (t == null) {
            return NOT_RESIDENT;
        }
        cache(space, vpn, t);
        return Tlb.pack(t.frame(), t.generation());
    }

    /** Puts a translation the kernel gave into the TLB, unless an invalidation overtook it. */
    void cache(AddressSpace space, long vpn, Translation t) {
        Tlb.Reservation reservation = tlb.reserve(Tlb.key(space.id(), vpn));
        if (reservation == null) {
            return;
        }
        if (reservation.evicted()) {
            counters.increment(NicCounter.TLB_EVICTIONS, RegistrationMode.ON_DEMAND);
            if (reservation.evictedPinned()) {
                nic.unpinEvicted(reservation.evictedKey());
            }
        }
        tlb.fill(reservation, t.frame(), t.generation(), false, () -> space.isCurrent(t));
    }

    @Override
    public void dropStale(MemoryRegion region, long vpn, long translation) {
        tlb.dropStale(Tlb.key(region.endpoint().id(), vpn), translation);
    }
}
