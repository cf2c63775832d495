package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.FaultKind;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelException;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.locks.LockSupport;

/**
 * Memory pressure on the pages a NIC serves its peers' requests from, for fault experiments: after a
 * request touched a page, with the configured probability, the kernel takes the page away from the NIC,
 * so the next request to touch it faults. MINOR takes the NIC's translation (its TLB entry and the pin
 * that holds, its on-demand mapping) as reclaim scanning or page migration would, the page staying in
 * memory; it is done when the next request reaches the page, on that request's thread, because a
 * thread woken per touch would take a core from the programs being measured on a small machine. MAJOR
 * pages the page out to swap as well, which cannot wait for the next touch: it runs at once on a
 * kernel fault-handler thread (and waits for the program's CPU to let go of the page). Off unless
 * configured; settable while the node runs; its draws come from the NIC's seed.
 */
public final class MemoryPressure {
    /** How long a page still under DMA (or still mapped by the program's CPU) is looked at again before it is left in memory. */
    private static final long PAGE_OUT_PATIENCE_NS = 5_000_000;
    private static final long PAGE_OUT_RETRY_NS = 20_000;

    private final KernelAgent kernel;
    private final NicCounters counters;
    private final Translations translations;
    private final SplittableRandom random;
    private volatile double rate;
    private volatile FaultKind depth;
    /** Pages a MINOR pressure took, by {@link Tlb#key}: their translations go when a request next reaches them. */
    private final Set<Long> dueMinor = ConcurrentHashMap.newKeySet();
    /** Pages a MAJOR pressure is paging out now, by {@link Tlb#key}. */
    private final Set<Long> pagingOut = ConcurrentHashMap.newKeySet();
    /** Pages marked at most: a peer that never comes back to its pages leaves no more than this behind. */
    private static final int MAX_DUE = 1 << 16;

    MemoryPressure(KernelAgent kernel, NicCounters counters, Translations translations, double rate, FaultKind depth, long seed) {
        this.kernel = kernel;
        this.counters = counters;
        this.translations = translations;
        this.random = new SplittableRandom(seed ^ 0x5EED_9A6EL);
        set(rate, depth);
    }

    /** Takes a page away after this share of peers' touches (0 turns it off), as {@code depth} says. */
    public void set(double rate, FaultKind depth) {
        if (!(rate >= 0 && rate <= 1) || depth == null) {
            throw new IllegalArgumentException("memory pressure takes a probability from 0 to 1 and a depth (MINOR or MAJOR), was " + rate
                    + " and " + depth);
        }
        this.depth = depth;
        this.rate = rate;
        dueMinor.clear();
    }

    /** Whether any pressure is set: one read on the per-page path when none is (setting none forgets the takes still due). */
    boolean on() {
        return rate > 0;
    }

    public double rate() {
        return rate;
    }

    public FaultKind depth() {
        return depth;
    }

    /** Whether a MAJOR take is under way (its page-out queued or running on a fault handler). */
    boolean pagingOut() {
        return !pagingOut.isEmpty();
    }

    /** A peer's request touched page {@code vpn} of {@code region} (a resend that found it in counts: it is the touch that got through). */
    void touched(MemoryRegion region, long vpn) {
        boolean take;
        synchronized (random) {
            take = random.nextDouble() < rate;
        }
        if (!take) {
            return;
        }
        AddressSpace space = region.endpoint().space();
        if (depth == FaultKind.MINOR) {
            if (dueMinor.size() < MAX_DUE) {
                dueMinor.add(Tlb.key(space.id(), vpn));
            }
            return;
        }
        long key = Tlb.key(space.id(), vpn);
        if (!pagingOut.add(key)) {
            return; // one take of a page at a time: the one under way goes on
        }
        RegistrationMode mode = region.mode();
        kernel.faultService().execute(() -> {
            try {
                reclaim(space, vpn, mode, FaultKind.MAJOR);
            } finally {
                pagingOut.remove(key);
            }
        });
    }

    /**
     * A peer's request is about to touch page {@code vpn} of {@code region}: if a MINOR pressure took it,
     * its translations go now ({@code beforeKernelCall} first releases what the caller holds, as before a
     * miss is resolved).
     */
    void beforeTouch(MemoryRegion region, long vpn, Runnable beforeKernelCall) {
        if (dueMinor.isEmpty()) {
            return;
        }
        AddressSpace space = region.endpoint().space();
        if (dueMinor.remove(Tlb.key(space.id(), vpn))) {
            if (beforeKernelCall != null) {
                beforeKernelCall.run();
            }
            reclaim(space, vpn, region.mode(), FaultKind.MINOR);
        }
    }

    /** The NIC's translation of a page: its TLB entry and the pin a PIN_ON_MISS entry holds, its on-demand mapping. */
    private void dropTranslation(AddressSpace space, long vpn) {
        translations.dropTranslations(space, vpn, 1);
        translations.onDemand.invalidate(space.id(), vpn, 1);
    }

    private void reclaim(AddressSpace space, long vpn, RegistrationMode mode, FaultKind kind) {
        if (space.isClosed() || mode == RegistrationMode.PINNED) {
            return; // a PINNED region's pages and its table stay for as long as it is registered
        }
        dropTranslation(space, vpn);
        if (kind == FaultKind.MAJOR) {
            try {
                // The touch that drew this may still hold the page for its copy, the program's CPU may map it
                // (a page-out waits for it to let go), and a touch meanwhile may translate it again: each look
                // takes the NIC's translation again. A page that stays in (pinned by its registration, or
                // still busy at the end) is not counted as taken.
                long deadline = System.nanoTime() + PAGE_OUT_PATIENCE_NS;
                while (space.pageOut(vpn << space.pageShift(), space.pageSize()) == 0 && space.isResident(vpn)) {
                    if (System.nanoTime() - deadline > 0) {
                        return;
                    }
                    LockSupport.parkNanos(PAGE_OUT_RETRY_NS);
                    dropTranslation(space, vpn);
                }
            } catch (KernelException e) {
                return; // freed or closed meanwhile
            }
        }
        counters.increment(NicCounter.PRESSURE_RECLAIMS, mode);
    }
}
