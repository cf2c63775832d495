package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelException;

/**
 * The NIC's translations of its endpoints' pages, and the pins behind them: the TLB (whose PIN_ON_MISS
 * entries each hold a pin), NetVM's shadow page table and the on-demand page table. The registration
 * modes' policies and the memory pressure work on them; the NIC drops an endpoint's when it closes.
 */
final class Translations {
    private static final System.Logger LOG = System.getLogger(Translations.class.getName());

    private final KernelAgent kernel;
    private final NicCounters counters;
    final Tlb tlb;
    final ShadowPageTable shadow = new ShadowPageTable();
    final OnDemandPageTable onDemand = new OnDemandPageTable();

    Translations(KernelAgent kernel, NicCounters counters, Tlb tlb) {
        this.kernel = kernel;
        this.counters = counters;
        this.tlb = tlb;
    }

    /** Releases the pin a PIN_ON_MISS entry held when the TLB replaced it. */
    void unpinEvicted(long key) {
        AddressSpace space = kernel.addressSpace((int) (key >>> 40));
        if (space == null) {
            return; // its endpoint closed, revoking every pin
        }
        releasePin(space, key & ((1L << 40) - 1));
    }

    /**
     * Gives back a pin the NIC took. A space closed or a page freed meanwhile took its pins with it; a
     * page that is still there and not pinned means the NIC's pin accounting is wrong, which is
     * logged and counted rather than swallowed.
     */
    void releasePin(AddressSpace space, long vpn) {
        try {
            space.unpin(vpn);
        } catch (KernelException e) {
            // Closed meanwhile: every pin went with it.
        } catch (IllegalStateException e) {
            if (!space.isClosed() && space.isAllocated(vpn << space.pageShift(), 1)) {
                counters.increment(NicCounter.PIN_ACCOUNTING_ERRORS);
                LOG.log(System.Logger.Level.WARNING, "the NIC released a pin it did not hold: " + e.getMessage(), e);
            }
        }
    }

    /** Drops TLB translations of a range (deregistration), releasing the pins PIN_ON_MISS entries held. */
    void dropTranslations(AddressSpace space, long firstVpn, long pages) {
        Tlb.Invalidated dropped = tlb.invalidate(space.id(), firstVpn, pages);
        for (int i = 0; i < dropped.pinnedCount; i++) {
            unpinEvicted(dropped.pinnedKeys[i]);
        }
    }
}
