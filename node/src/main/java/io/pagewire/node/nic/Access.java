package io.pagewire.node.nic;

import java.util.EnumSet;
import java.util.Set;

/** Access rights on a memory region or an event counter, after {@code ibv_access_flags}. */
public enum Access {
    /** The NIC may write the region for local operations (READ responses land there). */
    LOCAL_WRITE,
    /** Peers may WRITE into the region, or notify the event counter. */
    REMOTE_WRITE,
    /** Peers may READ the region. */
    REMOTE_READ,
    /** Peers may FETCH_ADD on the event counter (or atomics on the region's words). */
    REMOTE_ATOMIC,
    /** Memory windows may be bound to the region (IBV_ACCESS_MW_BIND). */
    MW_BIND;

    /** Every right. */
    public static Set<Access> all() {
        return EnumSet.allOf(Access.class);
    }

    static int mask(Set<Access> rights) {
        int mask = 0;
        for (Access a : rights) {
            mask |= 1 << a.ordinal();
        }
        return mask;
    }

    boolean in(int mask) {
        return (mask & (1 << ordinal())) != 0;
    }
}
