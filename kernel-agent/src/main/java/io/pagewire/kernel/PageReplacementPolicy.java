package io.pagewire.kernel;

/** Chooses which frame to take from its page when memory is full. */
interface PageReplacementPolicy {
    /**
     * A frame that {@link FrameTable#isEvictable} accepts, or -1 when a full sweep found none.
     * Never a pinned frame, nor one under DMA.
     */
    int selectVictim(FrameTable frames);
}
