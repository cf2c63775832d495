package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.FaultKind;
import io.pagewire.kernel.KernelException;
import java.util.SplittableRandom;
import java.util.concurrent.locks.LockSupport;

/**
 * Memory pressure on the pages a NIC serves its peers' requests from, for fault experiments: just
 * after a request touched a page, with the configured probability, the kernel takes the page away from
 * the NIC, so the next request to touch it faults. MINOR takes the NIC's translation (its TLB entry and
 * the pin that holds, its on-demand mapping) as reclaim scanning or page migration would, the page
 * staying in memory; MAJOR pages it out to swap as well (once the program's CPU has let go of it). Runs
 * on the kernel's fault-handler threads, off the packet path. Off unless configured; settable while the
 * node runs; its draws come from the NIC's seed.
 */
public final class MemoryPressure {
    /** Looks at a page still under DMA (or still mapped by the program's CPU) before leaving it in memory: about a millisecond. */
    private static final int PAGE_OUT_ATTEMPTS = 50;
    private static final long PAGE_OUT_RETRY_NS = 20_000;

    private final Nic nic;
    private final SplittableRandom random;
    private volatile double rate;
    private volatile FaultKind depth;

    MemoryPressure(Nic nic, double rate, FaultKind depth, long seed) {
        this.nic = nic;
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
    }

    public double rate() {
        return rate;
    }

    public FaultKind depth() {
        return depth;
    }

    /** A peer's request touched page {@code vpn} of {@code region} (a resend that found it in counts: it is the touch that got through). */
    void touched(MemoryRegion region, long vpn) {
        double r = rate;
        if (r <= 0) {
            return;
        }
        boolean take;
        synchronized (random) {
            take = random.nextDouble() < r;
        }
        if (take) {
            AddressSpace space = region.endpoint().space();
            RegistrationMode mode = region.mode();
            FaultKind kind = depth;
            nic.kernel().faultService().execute(() -> reclaim(space, vpn, mode, kind));
        }
    }

    private void reclaim(AddressSpace space, long vpn, RegistrationMode mode, FaultKind kind) {
        if (space.isClosed()) {
            return;
        }
        nic.dropTranslations(space, vpn, 1); // the TLB entry, and the pin a PIN_ON_MISS entry holds
        nic.onDemandPageTable().invalidate(space.id(), vpn, 1);
        if (kind == FaultKind.MAJOR) {
            try {
                // The touch that drew this may still hold the page for its copy, which a page-out leaves alone.
                for (int attempt = 0; attempt < PAGE_OUT_ATTEMPTS && space.pageOut(vpn << space.pageShift(), space.pageSize()) == 0
                        && space.isResident(vpn); attempt++) {
                    LockSupport.parkNanos(PAGE_OUT_RETRY_NS);
                }
            } catch (KernelException e) {
                return; // freed or closed meanwhile
            }
        }
        nic.counters().increment(NicCounter.PRESSURE_RECLAIMS, mode);
    }
}
