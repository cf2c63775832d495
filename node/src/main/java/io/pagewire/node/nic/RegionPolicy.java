package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.PageFault;
import io.pagewire.kernel.SystemBufferFullException;
import io.pagewire.kernel.Translation;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * What one registration mode does with a region's pages, in one place: how the DMA engine translates
 * them, what a receive into a page that is not resident does, and what registering, prefetching and
 * deregistering a region do. One per mode per NIC ({@link PinnedPolicy}, {@link PinOnMissPolicy},
 * {@link ShadowPolicy}, {@link OnDemandPolicy}); every region holds its mode's.
 *
 * <p>{@link #lookup} is the per-page hot path and never calls the kernel. {@link #resolve} runs after a
 * miss and may call the kernel, so its caller holds no DMA lock when it calls it.
 */
abstract class RegionPolicy {
    /** {@link #lookup} found nothing cached. */
    static final long MISS = -1L;
    /** {@link #resolve}: the page is not resident and this mode will not bring it in synchronously. */
    static final long NOT_RESIDENT = -2L;

    /** What became of a received part whose page was missing. */
    enum Verdict {
        /** Taken: it is placed later, and the responder acknowledges it then. */
        PARKED,
        /** Not taken: the responder answers RNR NAK and the requester sends it again. */
        NOT_READY
    }

    /** Where a part is parked: the responder, which tracks parked parts by PSN. */
    interface Parking {
        void park(AddressSpace space, long address, ByteBuffer part);
    }

    protected final NicServices nic;
    private final RegistrationMode mode;

    RegionPolicy(NicServices nic, RegistrationMode mode) {
        this.nic = nic;
        this.mode = mode;
    }

    final RegistrationMode mode() {
        return mode;
    }

    // ---- translation -------------------------------------------------------------------------------------

    /**
     * The cached translation of a page, packed by {@link Tlb#pack}, or {@link #MISS}.
     *
     * @param side what the page is to the request: TLB lookups are counted by it
     * @param again whether the packet this lookup is for was sent before (counted apart)
     */
    abstract long lookup(MemoryRegion region, long vpn, Side side, boolean again);

    /** The translation of a page after a miss, or {@link #NOT_RESIDENT}. */
    abstract long resolve(MemoryRegion region, long vpn, boolean write, Side side);

    /** A page fault raised for this mode was served: it may cache the kernel's translation now. */
    void faultServed(MemoryRegion region, long vpn, Translation translation) {
    }

    /**
     * Faults a page of a region in through the kernel's fault service, the one way the NIC's faults are
     * served: once the page is in, the fault is counted for the side that raised it and this mode may
     * cache its translation. Completes with the served fault, or exceptionally with the kernel's refusal.
     */
    final CompletableFuture<PageFault> fault(MemoryRegion region, long vpn, boolean write, Side side) {
        return nic.kernel().faultService().submit(region.endpoint().space(), vpn, write).thenApply(fault -> {
            nic.observers().faultServed(region, side, fault.kind(), fault.serviceTimeNs());
            faultServed(region, vpn, fault.translation());
            return fault;
        });
    }

    /** Forgets a translation whose frame was reclaimed after it was cached. */
    abstract void dropStale(MemoryRegion region, long vpn, long translation);

    // ---- receives into pages that are not resident -------------------------------------------------------

    /**
     * Whether receives into this mode's pages spend the responder's credits: true only where data may
     * wait in the system buffer, which credits keep from overflowing.
     */
    boolean spendsCredits() {
        return false;
    }

    /**
     * Whether data for this page must not be written directly even though the page is resident:
     * earlier data for it still waits to be placed, and placing this first would reorder them.
     */
    boolean queuedBehind(AddressSpace space, long vpn) {
        return false;
    }

    /**
     * A part of a receive found its page missing (only modes whose {@link #resolve} can answer
     * {@link #NOT_RESIDENT} ever get here).
     *
     * @param operationEnd where what the operation will still write ends (exclusive): the rest of an RDMA
     *        WRITE's message, or of the receive buffer a SEND lands in
     * @throws KernelException when the page can never come in (the request is refused)
     * @throws SystemBufferFullException when there is nowhere to park it (RNR NAK)
     */
    Verdict missing(MemoryRegion region, long vpn, long address, long operationEnd, ByteBuffer part, Side side, Parking parking) {
        throw new IllegalStateException(mode + " translates every page it receives into; page 0x" + Long.toHexString(address)
                + " of " + region + " came back missing");
    }

    // ---- the region's life ----------------------------------------------------------------------------

    /**
     * Before a region of [address, address + length) exists: what registration does to its pages. For
     * PINNED, pins them all and returns their translation table; null for the other modes.
     */
    long[] pinForRegistration(AddressSpace space, long address, long length) {
        return null;
    }

    /** The region was registered and published. */
    void registered(MemoryRegion region) {
    }

    /**
     * The region is deregistered or its endpoint closes: its translations and pins go.
     *
     * @param wasUsable whether it was valid until now (a region whose memory was freed lost its pins with it)
     */
    abstract void released(MemoryRegion region, boolean wasUsable);

    /**
     * Brings pages [firstVpn, firstVpn + pages) of a region in and makes their translations ready, as
     * {@code ibv_advise_mr} does.
     *
     * @return completes when every page was dealt with
     */
    abstract CompletableFuture<Void> advise(MemoryRegion region, long firstVpn, int pages, Endpoint.Advice advice);

    /**
     * Prefetch for modes that fault pages in asynchronously: resident pages are translated now, the
     * others (unless NO_FAULT) are faulted in by the kernel's fault service and translated once in.
     */
    protected final CompletableFuture<Void> prefetchByFaults(MemoryRegion region, long firstVpn, int pages, Endpoint.Advice advice) {
        AddressSpace space = region.endpoint().space();
        boolean write = advice == Endpoint.Advice.PREFETCH_WRITE;
        List<CompletableFuture<?>> faults = new ArrayList<>();
        for (int i = 0; i < pages; i++) {
            long vpn = firstVpn + i;
            Translation resident = space.translate(vpn);
            if (resident != null) {
                faultServed(region, vpn, resident);
                prefetched(region);
            } else if (advice != Endpoint.Advice.PREFETCH_NO_FAULT) {
                faults.add(fault(region, vpn, write, Side.PREFETCH).thenRun(() -> prefetched(region)));
            }
        }
        return CompletableFuture.allOf(faults.toArray(CompletableFuture[]::new));
    }

    /** One page of {@code region} prefetched: counted for the NIC and for the region. */
    protected final void prefetched(MemoryRegion region) {
        nic.counters().increment(NicCounter.PREFETCHED_PAGES);
        region.counters().prefetched();
    }
}
