package io.pagewire.node.nic;

/**
 * What the two TLB-based modes share: a counted lookup in the NIC's TLB, and taking a slot for a miss
 * (counting the eviction and releasing the pin the evicted entry held). They differ in what fills
 * the slot: a pinned page (PIN_ON_MISS) or a page-table walk (ON_DEMAND).
 */
abstract class TlbTranslator implements Translator {
    protected final Nic nic;
    protected final Tlb tlb;
    protected final NicCounters counters;
    private final RegistrationMode mode;
    private final boolean needPin;

    TlbTranslator(Nic nic, RegistrationMode mode, boolean needPin) {
        this.nic = nic;
        this.tlb = nic.tlb();
        this.counters = nic.counters();
        this.mode = mode;
        this.needPin = needPin;
    }

    @Override
    public long lookup(MemoryRegion region, long vpn, Side side, boolean again) {
        long t = tlb.lookup(Tlb.key(region.endpoint().id(), vpn), needPin);
        boolean miss = t == Tlb.MISS;
        counters.increment(miss ? NicCounter.TLB_MISSES : NicCounter.TLB_HITS, mode);
        if (side != Side.PREFETCH) {
            counters.increment(NicCounter.tlbLookup(!side.gathers(), again, miss), mode);
        }
        return t;
    }

    @Override
    public void dropStale(MemoryRegion region, long vpn, long translation) {
        tlb.dropStale(Tlb.key(region.endpoint().id(), vpn), translation);
    }

    /** A slot for a missing page, its previous entry evicted (and unpinned); null when every way is being filled. */
    protected Tlb.Reservation reserve(long key) {
        Tlb.Reservation reservation = tlb.reserve(key);
        if (reservation != null && reservation.evicted()) {
            counters.increment(NicCounter.TLB_EVICTIONS, mode);
            if (reservation.evictedPinned()) {
                nic.unpinEvicted(reservation.evictedKey());
            }
        }
        return reservation;
    }
}
