package io.pagewire.node.nic;

import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.PhysicalMemory;

/**
 * Moves bytes between packets and frames page by page, under the translation rules of each region's
 * mode ({@link RegionPolicy}) and under a DMA lock on every frame it touches, which page reclaim respects.
 *
 * <p>Rule: nothing calls the kernel while holding a DMA lock, because freeing memory holds the kernel
 * lock while it waits for DMA to drain. So before a miss is resolved through the kernel, the caller's
 * {@code beforeKernelCall} releases whatever it holds (an {@link Outbox} sends its packets).
 */
final class DmaEngine {
    private static final int ATTEMPTS = 32;

    private final PhysicalMemory memory;
    private final MemoryPressure pressure;
    private final int pageShift;
    private final int pageSize;

    DmaEngine(PhysicalMemory memory, MemoryPressure pressure) {
        this.memory = memory;
        this.pressure = pressure;
        this.pageSize = memory.pageSize();
        this.pageShift = Integer.numberOfTrailingZeros(pageSize);
    }

    int pageShift() {
        return pageShift;
    }

    int pageSize() {
        return pageSize;
    }

    PhysicalMemory memory() {
        return memory;
    }

    /**
     * Translates one page of a region and locks its frame for a DMA.
     *
     * @param again whether the packet this is for was sent before (its lookup is counted apart)
     * @return the locked translation (release it with {@link #release}), or {@link RegionPolicy#NOT_RESIDENT}
     * @throws RegionInvalidException if the region stopped being usable
     * @throws KernelException if the kernel refused the page (bad address, limits, memory exhausted)
     */
    long acquire(MemoryRegion region, long vpn, boolean write, Side side, boolean again, Runnable beforeKernelCall) {
        checkUsable(region);
        boolean pressed = pressure.on() && side.servesPeer();
        if (pressed) {
            pressure.beforeTouch(region, vpn, beforeKernelCall);
        }
        RegionPolicy policy = region.policy();
        long t = policy.lookup(region, vpn, side, again);
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
            if (t != RegionPolicy.MISS) {
                if (memory.tryLockForDma(Tlb.frameOf(t), Tlb.generationOf(t))) {
                    if (pressed) {
                        pressure.touched(region, vpn);
                    }
                    return t;
                }
                policy.dropStale(region, vpn, t);
                checkUsable(region);
            }
            if (beforeKernelCall != null) {
                beforeKernelCall.run();
            }
            t = policy.resolve(region, vpn, write, side);
            if (t == RegionPolicy.NOT_RESIDENT) {
                return t;
            }
        }
        throw new KernelException("the translation of page 0x" + Long.toHexString(vpn << pageShift) + " in " + region
                + " went stale " + ATTEMPTS + " times in a row");
    }

    void release(long translation, boolean wrote) {
        memory.unlockDma(Tlb.frameOf(translation), wrote);
    }

    /**
     * The bytes at [va, va + length) of a region, for a packet, staged in {@code out} (a range across
     * pages in one piece); their frames stay locked in {@code out} until the packet is sent.
     *
     * @param again whether the packet was sent before (its lookups are counted apart)
     * @param notResident where to put the page that was not resident when {@link #NOT_STAGED} is returned
     * @return where the payload starts in {@code out}'s staging array as it is after this call, or
     *         {@link #NOT_STAGED} when a page is not resident (nothing is left locked for it)
     */
    int gather(MemoryRegion region, long va, int length, Side side, boolean again, Outbox out, long[] notResident) {
        if (length == 0) {
            checkUsable(region);
            return 0;
        }
        int offset = (int) (va & (pageSize - 1));
        if (offset + length <= pageSize) {
            long t = acquire(region, va >>> pageShift, false, side, again, out::flush);
            if (t == RegionPolicy.NOT_RESIDENT) {
                notResident[0] = va >>> pageShift;
                return NOT_STAGED;
            }
            out.holdLock(t);
            int at = out.reserve(length);
            memory.read(Tlb.frameOf(t), offset, out.staging(), at, length);
            return at;
        }
        // Across pages (an MTU above the page size): every page is locked first (a wait for one may
        // flush the outbox, which starts the staging array over), then each part is staged after the
        // one before; the frames stay locked until the packet is sent.
        int pages = pagesSpanned(va, length, pageShift);
        long[] locked = new long[pages];
        int held = 0;
        try {
            for (int done = 0; done < length; ) {
                long at = va + done;
                int chunk = Math.min(pageSize - (int) (at & (pageSize - 1)), length - done);
                long t = acquire(region, at >>> pageShift, false, side, again, out::flush);
                if (t == RegionPolicy.NOT_RESIDENT) {
                    notResident[0] = at >>> pageShift;
                    return NOT_STAGED;
                }
                locked[held++] = t;
                done += chunk;
            }
            int into = out.reserve(length);
            for (int done = 0, i = 0; done < length; i++) {
                long at = va + done;
                int pageOffset = (int) (at & (pageSize - 1));
                int chunk = Math.min(pageSize - pageOffset, length - done);
                memory.read(Tlb.frameOf(locked[i]), pageOffset, out.staging(), into + done, chunk);
                done += chunk;
            }
            for (int i = 0; i < held; i++) {
                out.holdLock(locked[i]);
            }
            held = 0;
            return into;
        } finally {
            for (int i = 0; i < held; i++) {
                release(locked[i], false);
            }
        }
    }

    /** What {@link #gather} returns when a page is not resident. */
    static final int NOT_STAGED = -1;

    /** Pages that [va, va + length) touches; a zero-length range touches none. */
    static int pagesSpanned(long va, long length, int pageShift) {
        if (length <= 0) {
            return 0;
        }
        return (int) (((va + length - 1) >>> pageShift) - (va >>> pageShift) + 1);
    }

    private static void checkUsable(MemoryRegion region) {
        if (region.invalidReason() != null) {
            throw new RegionInvalidException(region);
        }
    }
}
