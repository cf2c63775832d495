package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;

/**
 * What the two TLB-based modes share: a counted lookup in the NIC's TLB, taking a slot for a miss
 * (counting the eviction and releasing the pin the evicted entry held), and dropping a released
 * region's entries. They differ in what fills the slot: a pinned page (PIN_ON_MISS) or a page-table
 * walk (ON_DEMAND).
 */
abstract class TlbPolicy extends RegionPolicy {
    protected final Translations translations;
    protected final Tlb tlb;
    protected final NicCounters counters;
    private final boolean needPin;

    TlbPolicy(NicServices nic, Translations translations, RegistrationMode mode, boolean needPin) {
        super(nic, mode);
        this.translations = translations;
        this.tlb = translations.tlb;
        this.counters = nic.counters();
        this.needPin = needPin;
    }

    @Override
    final long lookup(MemoryRegion region, long vpn, Side side, boolean again) {
        long t = tlb.lookup(Tlb.key(region.endpoint().id(), vpn), needPin);
        boolean miss = t == Tlb.MISS;
        counters.increment(miss ? NicCounter.TLB_MISSES : NicCounter.TLB_HITS, mode());
        if (side != Side.PREFETCH) {
            counters.increment(NicCounter.tlbLookup(!side.gathers(), again, miss), mode());
        }
        return t;
    }

    @Override
    final void dropStale(MemoryRegion region, long vpn, long translation) {
        tlb.dropStale(Tlb.key(region.endpoint().id(), vpn), translation);
    }

    @Override
    void released(MemoryRegion region, boolean wasUsable) {
        if (!region.implicit()) {
            AddressSpace space = region.endpoint().space();
            int shift = space.pageShift();
            translations.dropTranslations(space, region.address() >>> shift, DmaEngine.pagesSpanned(region.address(), region.length(), shift));
        }
    }

    /** A slot for a missing page, its previous entry evicted (and unpinned); null when every way is being filled. */
    protected final Tlb.Reservation reserve(long key) {
        Tlb.Reservation reservation = tlb.reserve(key);
        if (reservation != null && reservation.evicted()) {
            counters.increment(NicCounter.TLB_EVICTIONS, mode());
            if (reservation.evictedPinned()) {
                translations.unpinEvicted(reservation.evictedKey());
            }
        }
        return reservation;
    }
}
