package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.Translation;
import java.util.concurrent.CompletableFuture;

/**
 * PINNED (classic {@code ibv_reg_mr}): every page pinned at registration into the region's own full
 * translation table, which never misses; nothing to fault, prefetch or park.
 */
final class PinnedPolicy extends RegionPolicy {
    PinnedPolicy(NicServices nic) {
        super(nic, RegistrationMode.PINNED);
    }

    @Override
    long lookup(MemoryRegion region, long vpn, Side side, boolean again) {
        return region.pinnedTranslation(vpn);
    }

    @Override
    long resolve(MemoryRegion region, long vpn, boolean write, Side side) {
        return region.pinnedTranslation(vpn);
    }

    @Override
    void dropStale(MemoryRegion region, long vpn, long translation) {
        // A pinned frame is only ever taken when its memory is freed, which invalidates the region.
    }

    @Override
    long[] pinForRegistration(AddressSpace space, long address, long length) {
        space.pinRange(address, length);
        int shift = space.pageShift();
        long firstVpn = address >>> shift;
        int pages = DmaEngine.pagesSpanned(address, length, shift);
        long[] table = new long[pages];
        for (int i = 0; i < pages; i++) {
            Translation t = space.translate(firstVpn + i);
            table[i] = Tlb.pack(t.frame(), t.generation());
        }
        return table;
    }

    @Override
    void released(MemoryRegion region, boolean wasUsable) {
        AddressSpace space = region.endpoint().space();
        if (wasUsable && !space.isClosed()) {
            space.unpinRange(region.address(), region.length());
        }
    }

    @Override
    CompletableFuture<Void> advise(MemoryRegion region, long firstVpn, int pages, Endpoint.Advice advice) {
        return CompletableFuture.completedFuture(null); // every page is in and translated since registration
    }
}
