package io.pagewire.node.nic;

import java.util.List;

/**
 * What a work request must be before a queue pair queues it: an operation its transport carries,
 * lengths and alignments in range, and local elements in regions registered on its endpoint, usable,
 * covering them and writable where data lands. Every refusal is a {@link NicException} naming the
 * request, thrown at post time as a verbs provider returns it from {@code ibv_post_send}.
 */
final class WorkRequestChecks {
    /** The most scatter/gather elements one request or receive may have (what the device reports as max_sge). */
    static final int MAX_SEGMENTS = 32;

    private final Endpoint endpoint;
    private final NicServices nic;
    private final long maxMessageBytes;
    private final int mtu;

    WorkRequestChecks(Endpoint endpoint, NicServices nic) {
        this.endpoint = endpoint;
        this.nic = nic;
        this.maxMessageBytes = nic.context().maxMessageBytes();
        this.mtu = nic.context().mtuBytes();
    }

    /**
     * Checks a request that goes on the wire and returns how many packets (PSNs) it takes.
     *
     * @param datagram whether the pair is UD
     * @param unreliable whether it is UC or UD
     */
    int packets(WorkRequest wr, boolean datagram, boolean unreliable) {
        if (datagram && (wr.datagram() == null || (wr.opcode() != Completion.Opcode.SEND && wr.opcode() != Completion.Opcode.SEND_WITH_IMM))) {
            throw new NicException("work request " + wr.wrId() + ": " + (wr.datagram() == null ? "a UD SEND names its destination (an address"
                    + " handle, remote QPN and Q_Key)" : wr.opcode() + " needs a connected queue pair; UD carries SENDs"));
        }
        if (unreliable && (wr.isAtomic() || wr.opcode() == Completion.Opcode.READ)) {
            throw new NicException("work request " + wr.wrId() + ": " + wr.opcode() + " needs a reliable queue pair; UC carries WRITEs and SENDs");
        }
        if (wr.isAtomic()) {
            if (wr.rkey() != 0 && (wr.remoteAddress() & 7) != 0) {
                throw new NicException(String.format("work request %d: %s needs an 8-byte aligned remote address, was 0x%x", wr.wrId(),
                        wr.opcode(), wr.remoteAddress()));
            }
            if (wr.opcode() == Completion.Opcode.COMPARE_SWAP && wr.rkey() == 0) {
                throw new NicException("work request " + wr.wrId() + ": COMPARE_SWAP works on registered memory: give the word's rkey");
            }
            if (!wr.segments().isEmpty() && wr.length() != Long.BYTES) {
                throw new NicException("work request " + wr.wrId() + ": " + wr.opcode() + " fetches an 8-byte word; its local buffer is "
                        + wr.length() + " bytes");
            }
            return 1;
        }
        if (wr.length() < 0 || wr.length() > maxMessageBytes) {
            throw new NicException("work request " + wr.wrId() + ": length must be 0 to " + maxMessageBytes + ", was " + wr.length());
        }
        return datagram ? 1 : Math.max(1, (int) ((wr.length() + (long) mtu - 1) / mtu));
    }

    /**
     * The region of each of a request's elements (null for a zero-length one, which names no memory),
     * checked: registered here, usable, covering the element, and locally writable where data lands.
     */
    MemoryRegion[] localRegions(WorkRequest wr) {
        boolean landsHere = wr.opcode() == Completion.Opcode.READ || wr.isAtomic();
        List<Segment> segments = wr.segments();
        if (segments.size() > MAX_SEGMENTS) {
            throw new NicException("work request " + wr.wrId() + ": " + segments.size() + " scatter/gather elements; a request takes at most "
                    + MAX_SEGMENTS);
        }
        MemoryRegion[] regions = new MemoryRegion[segments.size()];
        for (int i = 0; i < regions.length; i++) {
            Segment e = segments.get(i);
            if (e.length() < 0) {
                throw new NicException("work request " + wr.wrId() + ": a scatter/gather element's length must not be negative, was "
                        + e.length());
            }
            if (e.length() == 0) {
                continue;
            }
            MemoryRegion local = endpoint.region(e.lkey());
            if (local == null) {
                throw new NicException("work request " + wr.wrId() + ": lkey " + e.lkey() + " is not registered on " + endpoint);
            }
            nic.contexts().read(ContextCache.Kind.REGION, local.rkey());
            if (local.invalidReason() != null) {
                throw new NicException("work request " + wr.wrId() + ": " + local + " is no longer usable: " + local.invalidReason());
            }
            if (!local.covers(e.address(), e.length())) {
                throw new NicException(String.format("work request %d: local range 0x%x+%d is outside %s", wr.wrId(), e.address(), e.length(),
                        local));
            }
            if (landsHere && !local.allows(Access.LOCAL_WRITE)) {
                throw new NicException("work request " + wr.wrId() + ": " + wr.opcode() + " lands in " + local + ", which lacks LOCAL_WRITE");
            }
            regions[i] = local;
        }
        return regions;
    }

    /** Why a pair of protection domain {@code pd} may not use one of these regions, or null. */
    static String protectionMismatch(MemoryRegion[] regions, int pd) {
        for (MemoryRegion region : regions) {
            String why = region == null ? null : region.protectionMismatch(pd);
            if (why != null) {
                return why;
            }
        }
        return null;
    }
}
