package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.Pinned;

/**
 * PIN_ON_MISS (U-Net/MM): translations live in the NIC's TLB; a miss asks the kernel to pin the page
 * (faulting it in synchronously, so a receive stalls its lane meanwhile), and the entry the new one
 * replaces is unpinned first. Only pages in the TLB are pinned.
 */
final class PinOnMissTranslator extends TlbTranslator {
    private static final int ATTEMPTS = 16;

    PinOnMissTranslator(Nic nic) {
        super(nic, RegistrationMode.PIN_ON_MISS, true);
    }

    @Override
    public long resolve(MemoryRegion region, long vpn, boolean write, Side side) {
        AddressSpace space = region.endpoint().space();
        long key = Tlb.key(space.id(), vpn);
        for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
            Tlb.Reservation reservation = reserve(key);
            if (reservation == null) {
                // Every way of the set is being filled by other misses; they finish quickly.
                Thread.onSpinWait();
                continue;
            }
            Pinned pinned;
            long start = nic.clock().nanoTime();
            try {
                pinned = space.pin(vpn, write);
            } catch (RuntimeException e) {
                tlb.cancel(reservation);
                throw e;
            } finally {
                if (side != Side.SEND) {
                    // U-Net/MM's receive stall: the lane waits while the kernel pins (and maybe faults in) the page.
                    counters.add(NicCounter.RECEIVE_STALL_NANOS, RegistrationMode.PIN_ON_MISS, nic.clock().nanoTime() - start);
                }
            }
            if (pinned.fault() != null) {
                nic.countFault(side, pinned.fault(), RegistrationMode.PIN_ON_MISS);
            }
            int frame = pinned.translation().frame();
            int generation = pinned.translation().generation();
            if (tlb.fill(reservation, frame, generation, true, () -> space.isCurrent(pinned.translation()))) {
                return Tlb.pack(frame, generation);
            }
            // An invalidation of this page overtook us; the page may be gone, so ask again.
            try {
                space.unpin(vpn);
            } catch (KernelException | IllegalStateException ignored) {
                // Freed meanwhile: its pins were revoked with it.
            }
        }
        throw new KernelException("page 0x" + Long.toHexString(vpn << space.pageShift()) + " of endpoint " + space.id()
                + " kept being invalidated while the NIC pinned it");
    }
}
