package io.pagewire.node.nic;

import io.pagewire.kernel.Translation;

/**
 * How one registration mode turns a region's virtual page into a frame for the DMA engine: a
 * strategy chosen per memory region by its {@link RegistrationMode}.
 *
 * <p>{@link #lookup} is the per-page hot path and never calls the kernel. {@link #resolve} runs after
 * a miss and may call the kernel, so the caller holds no DMA lock when it calls it.
 */
interface Translator {
    /** {@link #lookup} found nothing cached. */
    long MISS = -1L;
    /** {@link #resolve}: the page is not resident and this mode will not bring it in synchronously. */
    long NOT_RESIDENT = -2L;

    /**
     * The cached translation of a page, packed by {@link Tlb#pack}, or {@link #MISS}.
     *
     * @param side what the page is to the request: TLB lookups are counted by it
     * @param again whether the packet this lookup is for was sent before (counted apart)
     */
    long lookup(MemoryRegion region, long vpn, Side side, boolean again);

    /** The translation of a page after a miss, or {@link #NOT_RESIDENT}. */
    long resolve(MemoryRegion region, long vpn, boolean write, Side side);

    /**
     * A page fault raised for this mode was served: the mode may cache the kernel's translation now
     * (ON_DEMAND fills its TLB; the others learn of pages another way or not at all).
     */
    default void faultServed(MemoryRegion region, long vpn, Translation translation) {
    }

    /** Forgets a translation whose frame was reclaimed after it was cached. */
    void dropStale(MemoryRegion region, long vpn, long translation);
}
