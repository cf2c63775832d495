package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.Translation;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

/**
 * ON_DEMAND (NIC on-demand paging): translations live in the TLB without pins. A miss looks in the
 * NIC's own page table ({@link OnDemandPageTable}): a page mapped there is walked and cached (unless an
 * invalidation raced with the walk); one that is not, resident or not, raises a NIC page fault, served
 * asynchronously, which maps it. A receive into it raises a NIC page fault and answers
 * RNR NAK until the page is in; as mlx5's responder fault handler does, the fault covers the rest of
 * the operation, not the one page, up to {@link #MAX_FAULT_AHEAD_BYTES}, so the requester's resend finds
 * them in instead of meeting one RNR NAK, and one go-back-N resend, per page. Kernel invalidations
 * drop entries.
 */
final class OnDemandPolicy extends TlbPolicy {
    /** How far past the missing page one fault reaches (mlx5's MAX_PREFETCH_LEN). */
    static final long MAX_FAULT_AHEAD_BYTES = 4L << 20;

    private final OnDemandPageTable pageTable;

    /** The NIC page faults this mode raises for peers' requests: ODP's page-fault events. */
    private final ResponderFaults faults;

    OnDemandPolicy(NicServices nic, Translations translations, ResponderFaults faults) {
        super(nic, translations, RegistrationMode.ON_DEMAND, false);
        this.pageTable = translations.onDemand;
        this.faults = faults;
    }

    @Override
    long resolve(MemoryRegion region, long vpn, boolean write, Side side) {
        AddressSpace space = region.endpoint().space();
        if (!pageTable.maps(space.id(), vpn)) {
            return NOT_RESIDENT; // a NIC page fault, minor when the page is in memory
        }
        Translation t = space.translate(vpn);
        if (t == null) {
            return NOT_RESIDENT;
        }
        cache(space, vpn, t);
        return Tlb.pack(t.frame(), t.generation());
    }

    @Override
    void faultServed(MemoryRegion region, long vpn, Translation translation) {
        AddressSpace space = region.endpoint().space();
        pageTable.map(space.id(), vpn);
        cache(space, vpn, translation);
    }

    /**
     * The region's pages already resident are mapped now, without faulting any in (mlx5 maps an ODP
     * region's present pages at registration, MLX5_PF_FLAGS_SNAPSHOT); an implicit region maps nothing.
     */
    @Override
    void registered(MemoryRegion region) {
        if (region.implicit()) {
            return;
        }
        AddressSpace space = region.endpoint().space();
        int shift = space.pageShift();
        long firstVpn = region.address() >>> shift;
        int pages = DmaEngine.pagesSpanned(region.address(), region.length(), shift);
        long[] missing = space.nonResidentPages(firstVpn, pages);
        for (int i = 0, m = 0; i < pages; i++) {
            if (m < missing.length && missing[m] == firstVpn + i) {
                m++;
            } else {
                pageTable.map(space.id(), firstVpn + i);
            }
        }
    }

    @Override
    void released(MemoryRegion region, boolean wasUsable) {
        super.released(region, wasUsable);
        AddressSpace space = region.endpoint().space();
        if (region.implicit()) {
            pageTable.invalidateAll(space.id());
        } else {
            int shift = space.pageShift();
            pageTable.invalidate(space.id(), region.address() >>> shift, DmaEngine.pagesSpanned(region.address(), region.length(), shift));
        }
    }

    /** Puts a translation the kernel gave into the TLB, unless an invalidation overtook it. */
    private void cache(AddressSpace space, long vpn, Translation t) {
        Tlb.Reservation reservation = reserve(Tlb.key(space.id(), vpn));
        if (reservation != null) {
            tlb.fill(reservation, t.frame(), t.generation(), false, () -> space.isCurrent(t));
        }
    }

    @Override
    Verdict missing(MemoryRegion region, long vpn, long address, long operationEnd, ByteBuffer part, Side side, Parking parking) {
        String failed = faults.takeFailure(region.endpoint().space(), vpn);
        if (failed != null) {
            throw new KernelException("a page fault on the destination failed: " + failed);
        }
        if (!faults.raise(region, vpn, true, side)) {
            // Its fault is in flight: raised with the rest of this operation (up to the reach below)
            // when the first packet met a missing page, so a resend that meets it again, once per
            // RNR NAK until the pages are in, looks at nothing more.
            return Verdict.NOT_READY;
        }
        AddressSpace space = region.endpoint().space();
        int shift = space.pageShift();
        long regionEnd = region.implicit() ? Long.MAX_VALUE : region.address() + region.length();
        long end = Math.min(Math.min(operationEnd, regionEnd), (vpn << shift) + MAX_FAULT_AHEAD_BYTES);
        long aheadPages = ((end - 1) >> shift) - vpn; // pages after this one that the operation still writes
        for (long ahead = vpn + 1; ahead <= vpn + aheadPages; ahead++) {
            if (!pageTable.maps(space.id(), ahead)) { // resident or not: the NIC has no mapping for it
                faults.raise(region, ahead, true, side);
            }
        }
        return Verdict.NOT_READY;
    }

    @Override
    CompletableFuture<Void> advise(MemoryRegion region, long firstVpn, int pages, Endpoint.Advice advice) {
        return prefetchByFaults(region, firstVpn, pages, advice);
    }
}
