package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.PinLimitExceededException;
import io.pagewire.kernel.Pinned;
import java.util.concurrent.CompletableFuture;
import java.util.function.IntPredicate;
import java.util.function.LongConsumer;

/**
 * PIN_ON_MISS (U-Net/MM): translations live in the NIC's TLB; a miss asks the kernel to pin the page
 * (faulting it in synchronously, so a receive stalls its lane meanwhile), and the entry the new one
 * replaces is unpinned first. Only pages in the TLB are pinned, so a receive never meets a missing
 * page, and a prefetch pins at most a TLB's worth. When every way of the page's set stays taken by
 * other misses being filled, the page is translated without an entry: pinned to fault it in, its
 * translation read, unpinned; the DMA lock the caller takes keeps the frame for the copy.
 */
final class PinOnMissPolicy extends TlbPolicy {
    /** Which address spaces' entries may be unpinned to make room under {@code limit}. */
    private IntPredicate whoseEntries(PinLimitExceededException.Limit limit, AddressSpace space) {
        return switch (limit) {
            case MEMLOCK -> id -> id == space.id();
            case SHARE -> id -> {
                AddressSpace other = nic.kernel().addressSpace(id);
                return other != null && other.account() == space.account();
            };
            case NODE -> id -> true;
        };
    }

    private static final int ATTEMPTS = 16;
    /** Looks at a set whose every way is being filled before translating without an entry. */
    private static final int BUSY_LOOKS = 64;
    /** Entries one miss may unpin to get under the kernel's pin limit before it gives up. */
    private static final int MAX_ROOM_MAKING = 64;

    /** Tells the transport a receive stalled the lane it came on, for how many nanoseconds (U-Net/MM's stall). */
    private final LongConsumer laneStalled;

    PinOnMissPolicy(NicServices nic, Translations translations, LongConsumer laneStalled) {
        super(nic, translations, RegistrationMode.PIN_ON_MISS, true);
        this.laneStalled = laneStalled;
    }

    @Override
    long resolve(MemoryRegion region, long vpn, boolean write, Side side) {
        AddressSpace space = region.endpoint().space();
        long key = Tlb.key(space.id(), vpn);
        int busyLooks = 0;
        int madeRoom = 0;
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
            Tlb.Reservation reservation = reserve(key);
            if (reservation == null) {
                // Every way of the set is being filled by other misses; they usually finish quickly.
                if (++busyLooks >= BUSY_LOOKS) {
                    return withoutEntry(region, space, vpn, write, side);
                }
                Thread.onSpinWait();
                attempt--;
                continue;
            }
            Pinned pinned;
            long start = nic.clock().nanoTime();
            try {
                pinned = space.pin(vpn, write);
            } catch (PinLimitExceededException e) {
                tlb.cancel(reservation);
                // U-Net/MM: the kernel bounds what the NIC keeps pinned; the NIC makes room by unpinning
                // its least recently used entries (of this endpoint for its memlock limit, of its
                // application's endpoints for the application's share, of any for the node's) and asks again.
                long victim = madeRoom < MAX_ROOM_MAKING ? tlb.dropOldestPinned(whoseEntries(e.limit(), space)) : -1;
                if (victim < 0) {
                    throw e;
                }
                madeRoom++;
                counters.increment(NicCounter.TLB_EVICTIONS, RegistrationMode.PIN_ON_MISS);
                translations.unpinEvicted(victim);
                attempt--;
                continue;
            } catch (RuntimeException e) {
                tlb.cancel(reservation);
                throw e;
            } finally {
                if (side.stallsLane()) {
                    // U-Net/MM's receive stall: the lane waits while the kernel pins (and maybe faults in) the page.
                    receiveStalled(start);
                }
            }
            region.counters().pinned(1);
            if (pinned.fault() != null) {
                nic.observers().faultServed(region, side, pinned.fault(), nic.clock().nanoTime() - start);
            }
            int frame = pinned.translation().frame();
            int generation = pinned.translation().generation();
            if (tlb.fill(reservation, frame, generation, true, () -> space.isCurrent(pinned.translation()))) {
                return Tlb.pack(frame, generation);
            }
            // An invalidation of this page overtook us; the page may be gone, so ask again.
            translations.releasePin(space, vpn);
        }
        throw new KernelException("page 0x" + Long.toHexString(vpn << space.pageShift()) + " of endpoint " + space.id()
                + " kept being invalidated while the NIC pinned it");
    }

    /** A translation with no TLB entry to hold it (and so no pin kept): faulted in by a pin that is released at once. */
    private long withoutEntry(MemoryRegion region, AddressSpace space, long vpn, boolean write, Side side) {
        counters.increment(NicCounter.TLB_BYPASSES, RegistrationMode.PIN_ON_MISS);
        long start = nic.clock().nanoTime();
        Pinned pinned = space.pin(vpn, write);
        region.counters().pinned(1);
        try {
            if (pinned.fault() != null) {
                nic.observers().faultServed(region, side, pinned.fault(), nic.clock().nanoTime() - start);
            }
            return Tlb.pack(pinned.translation().frame(), pinned.translation().generation());
        } finally {
            translations.releasePin(space, vpn); // freed meanwhile: the caller's DMA lock will find the frame gone
            if (side.stallsLane()) {
                receiveStalled(start);
            }
        }
    }

    @Override
    CompletableFuture<Void> advise(MemoryRegion region, long firstVpn, int pages, Endpoint.Advice advice) {
        AddressSpace space = region.endpoint().space();
        boolean write = advice == Endpoint.Advice.PREFETCH_WRITE;
        int reach = Math.min(pages, tlb.entries());
        for (int i = 0; i < reach; i++) {
            long vpn = firstVpn + i;
            if (advice == Endpoint.Advice.PREFETCH_NO_FAULT && !space.isResident(vpn)) {
                continue;
            }
            if (lookup(region, vpn, Side.PREFETCH, false) == MISS) {
                resolve(region, vpn, write, Side.PREFETCH);
            }
            prefetched(region);
        }
        return CompletableFuture.completedFuture(null);
    }

    private void receiveStalled(long since) {
        long stalled = nic.clock().nanoTime() - since;
        counters.add(NicCounter.RECEIVE_STALL_NANOS, RegistrationMode.PIN_ON_MISS, stalled);
        nic.observers().waited(WaitCause.RECEIVE_STALL, stalled);
        laneStalled.accept(stalled);
    }
}
