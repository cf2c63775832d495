package io.pagewire.node.nic;

/** PINNED: the region's own full translation table, made at registration; it never misses. */
final class PinnedTranslator implements Translator {
    @Override
    public long lookup(MemoryRegion region, long vpn, Side side, boolean again) {
        return region.pinnedTranslation(vpn);
    }

    @Override
    public long resolve(MemoryRegion region, long vpn, boolean write, Side side) {
        return region.pinnedTranslation(vpn);
    }

    @Override
    public void dropStale(MemoryRegion region, long vpn, long translation) {
        // A pinned frame is only ever taken when its memory is freed, which invalidates the region.
    }
}
