package io.pagewire.node.nic;

/**
 * SHADOW (NetVM): translations come from the shadow page table the kernel keeps; a page missing there
 * is not resident. The NIC never pins: it locks a page only for the DMA that copies it.
 */
final class ShadowTranslator implements Translator {
    private final ShadowPageTable shadow;

    ShadowTranslator(ShadowPageTable shadow) {
        this.shadow = shadow;
    }

    @Override
    public long lookup(MemoryRegion region, long vpn, Side side, boolean again) {
        long t = shadow.lookup(Tlb.key(region.endpoint().id(), vpn));
        return t == ShadowPageTable.ABSENT ? MISS : t;
    }

    @Override
    public long resolve(MemoryRegion region, long vpn, boolean write, Side side) {
        long t = shadow.lookup(Tlb.key(region.endpoint().id(), vpn));
        return t == ShadowPageTable.ABSENT ? NOT_RESIDENT : t;
    }

    @Override
    public void dropStale(MemoryRegion region, long vpn, long translation) {
        shadow.dropStale(Tlb.key(region.endpoint().id(), vpn), translation);
    }
}
