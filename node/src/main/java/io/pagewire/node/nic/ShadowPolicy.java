package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.Translation;
import java.nio.ByteBuffer;
import java.util.concurrent.CompletableFuture;

/**
 * SHADOW (NetVM): translations come from the shadow page table, which the kernel keeps up to date for
 * every resident page of a SHADOW region; a page missing there is not resident. The NIC never pins: it
 * locks a page only for the DMA that copies it. A receive into a page that is not resident parks its
 * data in the node's system buffer, which the receive credits keep from overflowing (so receives into
 * SHADOW pages spend credits); the kernel places it once the page is in.
 */
final class ShadowPolicy extends RegionPolicy {
    private final ShadowPageTable shadow;

    ShadowPolicy(NicServices nic, Translations translations) {
        super(nic, RegistrationMode.SHADOW);
        this.shadow = translations.shadow;
    }

    @Override
    long lookup(MemoryRegion region, long vpn, Side side, boolean again) {
        long t = shadow.lookup(Tlb.key(region.endpoint().id(), vpn));
        return t == ShadowPageTable.ABSENT ? MISS : t;
    }

    @Override
    long resolve(MemoryRegion region, long vpn, boolean write, Side side) {
        long t = shadow.lookup(Tlb.key(region.endpoint().id(), vpn));
        return t == ShadowPageTable.ABSENT ? NOT_RESIDENT : t;
    }

    @Override
    void dropStale(MemoryRegion region, long vpn, long translation) {
        shadow.dropStale(Tlb.key(region.endpoint().id(), vpn), translation);
    }

    @Override
    boolean spendsCredits() {
        return true;
    }

    @Override
    boolean queuedBehind(AddressSpace space, long vpn) {
        return nic.kernel().systemBuffer().hasParked(space, vpn);
    }

    @Override
    Verdict missing(MemoryRegion region, long vpn, long address, long operationEnd, ByteBuffer part, Side side, Parking parking) {
        parking.park(region.endpoint().space(), address, part);
        nic.counters().increment(NicCounter.PARKED_PARTS, RegistrationMode.SHADOW);
        if (side == Side.RECEIVE_BUFFER) {
            nic.counters().increment(NicCounter.RECEIVE_BUFFER_PARKED_PARTS, RegistrationMode.SHADOW);
        }
        return Verdict.PARKED;
    }

    /** The region's resident pages enter the shadow table now; the kernel's map events keep it current from here on. */
    @Override
    void registered(MemoryRegion region) {
        region.endpoint().shadowRegionAdded(region);
        populate(region);
    }

    @Override
    void released(MemoryRegion region, boolean wasUsable) {
        Endpoint endpoint = region.endpoint();
        endpoint.shadowRegionRemoved(region);
        int shift = endpoint.space().pageShift();
        shadow.invalidate(endpoint.id(), region.address() >>> shift, DmaEngine.pagesSpanned(region.address(), region.length(), shift));
        for (MemoryRegion other : endpoint.shadowRegions()) {
            if (other.invalidReason() == null) {
                populate(other); // pages it shares with the released region stay in the table
            }
        }
    }

    @Override
    CompletableFuture<Void> advise(MemoryRegion region, long firstVpn, int pages, Endpoint.Advice advice) {
        return prefetchByFaults(region, firstVpn, pages, advice);
    }

    private void populate(MemoryRegion region) {
        AddressSpace space = region.endpoint().space();
        int shift = space.pageShift();
        long firstVpn = region.address() >>> shift;
        int pages = DmaEngine.pagesSpanned(region.address(), region.length(), shift);
        for (int i = 0; i < pages; i++) {
            Translation t = space.translate(firstVpn + i);
            if (t != null) {
                shadow.populate(space, Tlb.key(space.id(), firstVpn + i), t);
            }
        }
    }
}
