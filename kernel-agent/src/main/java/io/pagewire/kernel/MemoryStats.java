package io.pagewire.kernel;

/** A consistent snapshot of a node's memory: frames, pins, swap and the system buffer. */
public record MemoryStats(
        int pageSize,
        int totalFrames,
        int freeFrames,
        int residentPages,
        int pinnedPages,
        long memlockLimitBytes,
        long nodePinLimitBytes,
        int swapSlots,
        int swapSlotsUsed,
        int swappedPages,
        int systemBufferSlots,
        int systemBufferSlotsUsed,
        int addressSpaces) {

    public long pinnedBytes() {
        return (long) pinnedPages * pageSize;
    }
}
