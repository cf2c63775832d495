package io.pagewire.client;

import java.util.EnumSet;
import java.util.Set;

/** Access rights on a region or an event counter, after {@code ibv_access_flags}. */
public enum Access {
    LOCAL_WRITE,
    REMOTE_WRITE,
    REMOTE_READ,
    REMOTE_ATOMIC;

    /** Every right. */
    public static Set<Access> all() {
        return EnumSet.allOf(Access.class);
    }
}
