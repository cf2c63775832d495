package io.pagewire.node.nic;

import java.util.concurrent.atomic.LongAdder;

/**
 * What happened to one memory region, as {@code rdma stat mr} shows for an ODP region: the NIC's page
 * faults on it, the translations the kernel made it drop, pages prefetched and pinned for it, and
 * the bytes that reached it and left it (first transmissions: what the applications moved).
 */
public final class RegionCounters {
    private final LongAdder minorFaults = new LongAdder();
    private final LongAdder majorFaults = new LongAdder();
    private final LongAdder invalidations = new LongAdder();
    private final LongAdder prefetchedPages = new LongAdder();
    private final LongAdder pins = new LongAdder();
    private final LongAdder bytesReceived = new LongAdder();
    private final LongAdder bytesSent = new LongAdder();

    void fault(boolean major) {
        (major ? majorFaults : minorFaults).increment();
    }

    void invalidated(long translations) {
        invalidations.add(translations);
    }

    void prefetched() {
        prefetchedPages.increment();
    }

    void pinned(long pages) {
        pins.add(pages);
    }

    void received(long bytes) {
        bytesReceived.add(bytes);
    }

    void sent(long bytes) {
        bytesSent.add(bytes);
    }

    public long minorFaults() {
        return minorFaults.sum();
    }

    public long majorFaults() {
        return majorFaults.sum();
    }

    /** NIC translations of the region's pages dropped because the kernel reclaimed or unmapped them. */
    public long invalidations() {
        return invalidations.sum();
    }

    public long prefetchedPages() {
        return prefetchedPages.sum();
    }

    /** Pages pinned for the region: all of them at registration (PINNED), one per TLB fill (PIN_ON_MISS). */
    public long pins() {
        return pins.sum();
    }

    /** Bytes that peers' WRITEs, SENDs and atomics, and READ responses, placed in the region. */
    public long bytesReceived() {
        return bytesReceived.sum();
    }

    /** Bytes gathered from the region: WRITE and SEND sources, READ sources. */
    public long bytesSent() {
        return bytesSent.sum();
    }
}
