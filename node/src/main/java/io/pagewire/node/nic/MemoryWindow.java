package io.pagewire.node.nic;

import java.util.Set;

/**
 * A memory window, after {@code ibv_mw}: a range of a registered region that peers reach through the
 * window's own rkey, with the window's own rights. Type 1 is bound and rebound by the owner ({@code
 * ibv_bind_mw}) and serves any of the endpoint's queue pairs; type 2 is bound by a work request on one
 * queue pair, serves requests that arrive on that pair only, and must be invalidated (LOCAL_INV, or a
 * peer's SEND_WITH_INV) before it is bound again. The window's rkey is its index and an 8-bit key the
 * owner chooses at each bind ({@code ibv_inc_rkey}), so an old rkey stops working once the window is
 * bound anew. Its own lock guards it: binds come from the owner's queue pairs, lookups from any.
 */
public final class MemoryWindow {
    /** Set in every window's rkey and in no region's: which of the two an rkey names. */
    static final long RKEY_BIT = 1L << 31;
    private static final long KEY_MASK = 0xFF;

    /** The two kinds of window InfiniBand defines (type 2 as 2B: the binding pair's requests only). */
    public enum Type {
        ONE,
        TWO
    }

    private final Endpoint endpoint;
    private final Type type;
    private final int index;
    private long rkey;
    private MemoryRegion region;
    private long address;
    private long length;
    private int rights;
    private int qpn;
    private boolean deallocated;

    MemoryWindow(Endpoint endpoint, Type type, int index) {
        this.endpoint = endpoint;
        this.type = type;
        this.index = index;
        this.rkey = RKEY_BIT | ((long) index << 8);
    }

    /** The index part of a window rkey. */
    static int indexOf(long rkey) {
        return (int) ((rkey & ~RKEY_BIT & 0xFFFF_FFFFL) >>> 8);
    }

    public Type type() {
        return type;
    }

    public Endpoint endpoint() {
        return endpoint;
    }

    /** The rkey as of the last bind (or allocation). */
    public synchronized long rkey() {
        return rkey;
    }

    /**
     * Binds the window to [address, +length) of {@code target} with {@code access}, under {@code newRkey}
     * (this window's index with a key of the owner's choosing); a zero length unbinds a type 1 window.
     * Type 2 windows are bound by queue pair {@code qpn} and only when not bound already.
     *
     * @throws NicException when the region does not allow binding, the range or rights exceed it, the
     *         rkey is not this window's, or a type 2 window is still bound
     */
    synchronized void bind(MemoryRegion target, long start, long bytes, Set<Access> access, long newRkey, int byQpn) {
        checkUsable();
        if ((newRkey & ~KEY_MASK) != (rkey & ~KEY_MASK)) {
            throw new NicException(String.format("rkey 0x%x is not memory window 0x%x's (its index is fixed; the last 8 bits are the key)",
                    newRkey, rkey));
        }
        if (type == Type.TWO && region != null) {
            throw new NicException(String.format("type 2 memory window 0x%x is still bound: invalidate it first (LOCAL_INV or SEND_WITH_INV)",
                    rkey));
        }
        if (bytes == 0 && type == Type.ONE) {
            unbind();
            rkey = newRkey;
            return;
        }
        if (target == null || target.endpoint() != endpoint) {
            throw new NicException("a memory window binds to a region of its own endpoint");
        }
        if (target.invalidReason() != null) {
            throw new NicException(target + " is no longer usable: " + target.invalidReason());
        }
        if (!target.allows(Access.MW_BIND)) {
            throw new NicException(target + " was not registered with MW_BIND (IBV_ACCESS_MW_BIND)");
        }
        if (bytes < 0 || !target.covers(start, bytes)) {
            throw new NicException(String.format("window range 0x%x+%d is outside %s", start, bytes, target));
        }
        if ((access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC)) && !target.allows(Access.LOCAL_WRITE)) {
            throw new NicException("a window with REMOTE_WRITE or REMOTE_ATOMIC needs a region with LOCAL_WRITE, as with ibv_bind_mw");
        }
        unbind();
        target.windowBound(+1);
        region = target;
        address = start;
        length = bytes;
        rights = Access.mask(access);
        qpn = byQpn;
        rkey = newRkey;
    }

    /**
     * Invalidates a type 2 window (LOCAL_INV, SEND_WITH_INV): its rkey admits nothing until it is bound
     * again.
     *
     * @throws NicException for a type 1 window, or an rkey that is not its current one
     */
    synchronized void invalidate(long byRkey) {
        checkUsable();
        if (type != Type.TWO) {
            throw new NicException(String.format("memory window 0x%x is type 1: it is unbound by a zero-length bind, not invalidated", rkey));
        }
        if (byRkey != rkey) {
            throw new NicException(String.format("rkey 0x%x is not memory window 0x%x's current rkey", byRkey, rkey));
        }
        unbind();
    }

    /** Drops the window: its rkey admits nothing from now on. */
    synchronized void deallocate() {
        unbind();
        deallocated = true;
    }

    /**
     * The region a request may use through this window, or null with {@code why[0]} saying why not: the
     * rkey current, the right granted, the range inside the window, and for type 2 the request arriving
     * on the pair that bound it.
     */
    synchronized MemoryRegion admit(long requestRkey, int onQpn, Access right, long start, long bytes, String[] why) {
        if (deallocated || region == null || requestRkey != rkey) {
            why[0] = String.format("rkey 0x%x names no bound memory window%s", requestRkey, deallocated ? " (it was deallocated)"
                    : region == null ? " (the window is not bound)" : " (the window was bound anew under another key)");
            return null;
        }
        if (type == Type.TWO && onQpn != qpn) {
            why[0] = String.format("rkey 0x%x names a type 2 window bound by queue pair %d, not %d", requestRkey, qpn, onQpn);
            return null;
        }
        if (!right.in(rights)) {
            why[0] = String.format("rkey 0x%x names a window that does not allow %s", requestRkey, right);
            return null;
        }
        if (start < address || bytes < 0 || start + bytes > address + length) {
            why[0] = String.format("range 0x%x+%d is outside the window 0x%x+%d of rkey 0x%x", start, bytes, address, length, requestRkey);
            return null;
        }
        if (region.invalidReason() != null) {
            why[0] = String.format("rkey 0x%x names a window on a region that is no longer usable: %s", requestRkey, region.invalidReason());
            return null;
        }
        return region;
    }

    private void unbind() {
        if (region != null) {
            region.windowBound(-1);
            region = null;
        }
    }

    private void checkUsable() {
        if (deallocated) {
            throw new NicException(String.format("memory window 0x%x was deallocated", rkey));
        }
    }

    @Override
    public synchronized String toString() {
        return String.format("type %s memory window 0x%x%s", type == Type.ONE ? "1" : "2", rkey,
                region == null ? " (unbound)" : String.format(" over 0x%x+%d of lkey %d", address, length, region.lkey()));
    }
}
