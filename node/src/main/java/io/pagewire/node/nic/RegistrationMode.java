package io.pagewire.node.nic;

import java.util.Arrays;
import java.util.Locale;

/** How a memory region's pages are translated and kept resident for the NIC: the four designs Pagewire compares. */
public enum RegistrationMode {
    /** Classic {@code ibv_reg_mr}: the whole region pinned at registration, a full translation table, no misses. */
    PINNED,
    /** U-Net/MM: a TLB miss asks the kernel, which pins the page; a TLB eviction unpins it. */
    PIN_ON_MISS,
    /** NetVM: a shadow page table kept by the kernel; receives into non-resident pages go to the system buffer. */
    SHADOW,
    /** On-demand paging: misses raise NIC page faults; a receive fault answers RNR NAK. */
    ON_DEMAND;

    /** Parses a configured or requested mode, naming the choices when the value is unknown. */
    public static RegistrationMode parse(String value) {
        try {
            return valueOf(value.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("registration mode must be one of " + Arrays.toString(values()) + ", was '" + value + "'");
        }
    }
}
