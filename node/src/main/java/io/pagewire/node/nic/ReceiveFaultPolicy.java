package io.pagewire.node.nic;

import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.KernelException;
import java.nio.ByteBuffer;

/**
 * What a receive does when the page it lands on is not resident: the one place where the four
 * registration modes differ on the receive side, for RDMA-write targets and posted receive buffers
 * alike. PINNED never meets a missing page; PIN_ON_MISS stalls the lane while the kernel pins the page
 * (its translator's miss path, so a missing page never reaches the policy); SHADOW parks the data in
 * the node's system buffer, which the credits it keeps bound; ON_DEMAND raises a NIC page fault and
 * answers RNR NAK so that the requester comes back once the page is in.
 */
abstract class ReceiveFaultPolicy {
    /** What became of a part whose page was missing. */
    enum Verdict {
        /** Taken: it is placed later, and the responder acknowledges it then. */
        PARKED,
        /** Not taken: the responder answers RNR NAK and the requester sends it again. */
        NOT_READY
    }

    /** Where SHADOW puts a part it takes: the responder, which tracks parked parts by PSN. */
    interface Parking {
        void park(AddressSpace space, long address, ByteBuffer part);
    }

    /** The policy of each mode, indexed by ordinal; SHADOW's holds the node's receive credits. */
    static ReceiveFaultPolicy[] forEveryMode(Nic nic, CreditPool credits) {
        ReceiveFaultPolicy[] policies = new ReceiveFaultPolicy[RegistrationMode.values().length];
        policies[RegistrationMode.PINNED.ordinal()] = new NeverFaults(RegistrationMode.PINNED);
        policies[RegistrationMode.PIN_ON_MISS.ordinal()] = new NeverFaults(RegistrationMode.PIN_ON_MISS);
        policies[RegistrationMode.SHADOW.ordinal()] = new ParkInSystemBuffer(nic, credits);
        policies[RegistrationMode.ON_DEMAND.ordinal()] = new RnrWhileFaulting(nic);
        return policies;
    }

    /**
     * Whether receives into this mode's pages spend the responder's credits: true only where data may
     * wait in the system buffer, which credits keep from overflowing.
     */
    boolean spendsCredits() {
        return false;
    }

    /** The receive credits this policy guards its buffer with, or null. */
    CreditPool credits() {
        return null;
    }

    /**
     * Whether data for this page must not be written directly even though the page is resident:
     * earlier data for it still waits to be placed, and placing this first would reorder them.
     */
    boolean queuedBehind(AddressSpace space, long vpn) {
        return false;
    }

    /**
     * A part of a receive found its page missing.
     *
     * @param operationEnd where what the operation will still write ends (exclusive): the rest of an RDMA
     *        WRITE's message, or of the receive buffer a SEND lands in
     * @throws KernelException when the page can never come in (the request is refused)
     * @throws io.pagewire.kernel.SystemBufferFullException when there is nowhere to park it (RNR NAK)
     */
    abstract Verdict missing(MemoryRegion region, long vpn, long address, long operationEnd, ByteBuffer part, Side side, Parking parking);

    /** PINNED and PIN_ON_MISS: every page is translated (pinned if need be, stalling) before it is written. */
    private static final class NeverFaults extends ReceiveFaultPolicy {
        private final RegistrationMode mode;

        NeverFaults(RegistrationMode mode) {
            this.mode = mode;
        }

        @Override
        Verdict missing(MemoryRegion region, long vpn, long address, long operationEnd, ByteBuffer part, Side side, Parking parking) {
            throw new IllegalStateException(mode + " translates every page it receives into; page 0x" + Long.toHexString(address)
                    + " of " + region + " came back missing");
        }
    }

    /** SHADOW (NetVM): the part waits in the system buffer and is placed when the kernel pages its page in. */
    private static final class ParkInSystemBuffer extends ReceiveFaultPolicy {
        private final Nic nic;
        private final CreditPool credits;

        ParkInSystemBuffer(Nic nic, CreditPool credits) {
            this.nic = nic;
            this.credits = credits;
        }

        @Override
        boolean spendsCredits() {
            return true;
        }

        @Override
        CreditPool credits() {
            return credits;
        }

        @Override
        boolean queuedBehind(AddressSpace space, long vpn) {
            return nic.kernel().systemBuffer().hasParked(space, vpn);
        }

        @Override
        Verdict missing(MemoryRegion region, long vpn, long address, long operationEnd, ByteBuffer part, Side side, Parking parking) {
            parking.park(region.endpoint().space(), address, part);
            nic.counters().increment(NicCounter.PARKED_PARTS, RegistrationMode.SHADOW);
            if (side == Side.RECEIVE_BUFFER) {
                nic.counters().increment(NicCounter.RECEIVE_BUFFER_PARKED_PARTS, RegistrationMode.SHADOW);
            }
            return Verdict.PARKED;
        }
    }

    /**
     * ON_DEMAND (NIC on-demand paging): a NIC page fault, and RNR NAK until the page is in. As mlx5's
     * responder fault handler does, the fault covers the rest of the operation, not the one page: the
     * pages the message (or the receive buffer) will still write that are not resident are faulted in
     * too, up to {@link #MAX_FAULT_AHEAD_BYTES}, so that the requester's resend finds them in instead
     * of meeting one RNR NAK, and one go-back-N resend, per page.
     */
    private static final class RnrWhileFaulting extends ReceiveFaultPolicy {
        /** How far past the missing page one fault reaches (mlx5's MAX_PREFETCH_LEN). */
        static final long MAX_FAULT_AHEAD_BYTES = 4L << 20;

        private final Nic nic;

        RnrWhileFaulting(Nic nic) {
            this.nic = nic;
        }

        @Override
        Verdict missing(MemoryRegion region, long vpn, long address, long operationEnd, ByteBuffer part, Side side, Parking parking) {
            String failed = nic.responderFaults().takeFailure(region.endpoint().space(), vpn);
            if (failed != null) {
                throw new KernelException("a page fault on the destination failed: " + failed);
            }
            if (!nic.responderFaults().raise(region, vpn, true, side)) {
                // Its fault is in flight: raised with the rest of this operation (up to the reach below)
                // when the first packet met a missing page, so a resend that meets it again, once per
                // RNR NAK until the pages are in, looks at nothing more.
                return Verdict.NOT_READY;
            }
            AddressSpace space = region.endpoint().space();
            int shift = space.pageShift();
            long end = Math.min(Math.min(operationEnd, region.address() + region.length()), (vpn << shift) + MAX_FAULT_AHEAD_BYTES);
            long aheadPages = ((end - 1) >> shift) - vpn; // pages after this one that the operation still writes
            if (aheadPages > 0) {
                for (long ahead : space.nonResidentPages(vpn + 1, (int) aheadPages)) {
                    nic.responderFaults().raise(region, ahead, true, side);
                }
            }
            return Verdict.NOT_READY;
        }
    }
}
