package io.pagewire.node.nic;

import java.util.Arrays;
import java.util.Locale;

/** Which TLB set a page's entry goes to. */
public enum TlbIndexing {
    /** A hash of the address space and the virtual page number: pages spread over the sets whatever their stride. */
    HASHED,
    /**
     * The virtual page number's low bits, as hardware TLBs index: consecutive pages fill consecutive
     * sets, and pages a multiple of the set count apart share a set (strided access conflicts).
     */
    LOW_BITS;

    /** Parses a configured value ({@code hashed}, {@code low-bits}), naming the knob when the value is unknown. */
    public static TlbIndexing parse(String knob, String value) {
        try {
            return valueOf(value.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(knob + " must be one of " + Arrays.toString(values()) + ", was '" + value + "'");
        }
    }
}
