package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.Translation;

/**
 * ON_DEMAND (NIC on-demand paging): translations live in the TLB without pins. A miss walks the
 * kernel's page table; a resident page is cached (unless an invalidation raced with the walk), a
 * non-resident one is left to the caller to fault in asynchronously. Kernel invalidations drop
 * entries.
 */
final class OnDemandTranslator extends TlbTranslator {
    OnDemandTranslator(Nic nic) {
        super(nic, RegistrationMode.ON_DEMAND, false);
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

    @Override
    public void faultServed(MemoryRegion region, long vpn, Translation translation) {
        cache(region.endpoint().space(), vpn, translation);
    }

    /** Puts a translation the kernel gave into the TLB, unless an invalidation overtook it. */
    void cache(AddressSpace space, long vpn, Translation t) {
        Tlb.Reservation reservation = reserve(Tlb.key(space.id(), vpn));
        if (reservation != null) {
            tlb.fill(reservation, t.frame(), t.generation(), false, () -> space.isCurrent(t));
        }
    }
}
