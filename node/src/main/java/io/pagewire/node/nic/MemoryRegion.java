package io.pagewire.node.nic;

import java.util.EnumSet;
import java.util.Set;

/**
 * A range of an endpoint's virtual memory registered with the NIC: its keys, access rights and
 * registration mode. A PINNED region also holds its full translation table (every page pinned at
 * registration); the other modes translate through the TLB or the shadow page table.
 */
public final class MemoryRegion {
    /** The length of an implicit region: the whole address space, as {@code IBV_ACCESS_ON_DEMAND} allows with SIZE_MAX. */
    public static final long IMPLICIT_LENGTH = -1L;

    private final Endpoint endpoint;
    private final long address;
    private final long length;
    private final RegionPolicy policy;
    private final int accessMask;
    private final int lkey;
    private final long rkey;
    private final boolean implicit;
    /** PINNED: translation of every page, packed by {@link Tlb#pack}. */
    private final long[] table;
    private final long firstVpn;
    private final RegionCounters counters = new RegionCounters();
    private volatile String invalidReason;
    /** The protection domain it belongs to (verbs' ibv_pd); 0 for none, which every queue pair of its endpoint may use. */
    private volatile int protectionDomain;
    /** Memory windows bound to the region: it cannot be deregistered while any is, as with ibv_dereg_mr. */
    private final java.util.concurrent.atomic.AtomicInteger windowsBound = new java.util.concurrent.atomic.AtomicInteger();

    MemoryRegion(Endpoint endpoint, long address, long length, RegionPolicy policy, Set<Access> access, int lkey, long rkey,
            long[] table) {
        this.endpoint = endpoint;
        this.address = address;
        this.length = length;
        this.policy = policy;
        this.accessMask = Access.mask(access);
        this.lkey = lkey;
        this.rkey = rkey;
        this.implicit = length == IMPLICIT_LENGTH;
        this.table = table;
        this.firstVpn = address >>> endpoint.space().pageShift();
    }

    void windowBound(int delta) {
        windowsBound.addAndGet(delta);
    }

    /** How many memory windows are bound to the region now. */
    public int windowsBound() {
        return windowsBound.get();
    }

    /** What happened to the region: faults, invalidations, prefetches, pins, bytes. */
    public RegionCounters counters() {
        return counters;
    }

    public Endpoint endpoint() {
        return endpoint;
    }

    public long address() {
        return address;
    }

    /** Bytes covered; {@link #IMPLICIT_LENGTH} for an implicit region. */
    public long length() {
        return length;
    }

    public RegistrationMode mode() {
        return policy.mode();
    }

    /** What the region's registration mode does with its pages. */
    RegionPolicy policy() {
        return policy;
    }

    public Set<Access> access() {
        EnumSet<Access> rights = EnumSet.noneOf(Access.class);
        for (Access a : Access.values()) {
            if (a.in(accessMask)) {
                rights.add(a);
            }
        }
        return rights;
    }

    /** The key local work requests name the region by. */
    /** The protection domain it belongs to; 0 for none. */
    public int protectionDomain() {
        return protectionDomain;
    }

    /** Puts it in a protection domain (at registration, before its keys are handed out). */
    public void protectionDomain(int domain) {
        this.protectionDomain = domain;
    }

    /**
     * Why a queue pair of protection domain {@code domain} may not use it, or null: a region and a pair that
     * both name a domain must name the same one, as a verbs memory region and queue pair must share their PD.
     */
    public String protectionMismatch(int domain) {
        int own = protectionDomain;
        return own != 0 && domain != 0 && own != domain
                ? String.format("lkey %d belongs to protection domain %d, not to the queue pair's %d", lkey, own, domain) : null;
    }

    public int lkey() {
        return lkey;
    }

    /**
     * The key peers name the region by: 32 bits as in verbs (30 of them random, so a peer cannot guess them cheaply), and in the low two bits the
     * registration mode, which tells a requester whether its writes may park and must spend credits.
     */
    public long rkey() {
        return rkey;
    }

    /** Whether this is an implicit ON_DEMAND region over the whole address space. */
    public boolean implicit() {
        return implicit;
    }

    /** Why the region can no longer be used (deregistered, memory freed), or null while it is valid. */
    public String invalidReason() {
        return invalidReason;
    }

    boolean allows(Access right) {
        return right.in(accessMask);
    }

    /** Whether [address, address + length) lies in the region (the kernel checks implicit regions). */
    boolean covers(long from, long bytes) {
        if (bytes < 0 || from < 0) {
            return false;
        }
        if (implicit) {
            return true;
        }
        return from >= address && bytes <= length && from - address <= length - bytes;
    }

    /** Whether the region overlaps pages [firstPage, firstPage + pages). */
    boolean overlapsPages(long firstPage, long pages) {
        if (implicit) {
            return true;
        }
        int shift = endpoint.space().pageShift();
        long endVpn = (address + length + (1L << shift) - 1) >>> shift;
        return firstPage < endVpn && firstPage + pages > firstVpn;
    }

    long pinnedTranslation(long vpn) {
        return table[(int) (vpn - firstVpn)];
    }

    void invalidate(String reason) {
        if (invalidReason == null) {
            invalidReason = reason;
        }
    }

    @Override
    public String toString() {
        return String.format("%s region lkey %d rkey 0x%x at 0x%x+%s of endpoint %d", policy.mode(), lkey, rkey, address,
                implicit ? "all" : Long.toString(length), endpoint.id());
    }
}
