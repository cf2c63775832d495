package io.pagewire.kernel;

/**
 * One virtual page of an address space: where its contents are (a frame, a swap slot, or nowhere
 * yet) and how many pins hold it. The accessed and dirty bits of a resident page live in its
 * frame's state word ({@link PhysicalMemory}), where DMA sets them without the kernel lock.
 * Guarded by the kernel lock.
 */
final class PageTableEntry {
    /** The frame holding the page, or -1 when the page is not resident. */
    int frame = -1;
    /** The swap slot holding a copy of the page, or -1; a resident clean page may keep its slot. */
    int swapSlot = -1;
    /** Pins on the page; a pinned page keeps its frame. */
    int pinCount;
    /**
     * The page is moving between a frame and its swap slot with the kernel lock released (read in, or
     * written back after eviction); whoever needs it waits for the transit to end.
     */
    boolean inTransit;
    /**
     * A CPU maps the page in its own page tables (the C verbs library maps its frame at the program's
     * address): reclaim may not take the frame until that CPU has unmapped it.
     */
    boolean cpuMapped;
    /** Reclaim asked that CPU to unmap the page and waits for it to say it did. */
    boolean cpuUnmapRequested;
    /** A page-out ({@link AddressSpace#pageOut}) waits for that CPU's unmap to take the page. */
    boolean pageOutWanted;

    boolean present() {
        return frame >= 0;
    }
}
