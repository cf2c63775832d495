package io.pagewire.node.nic;

import java.util.Arrays;
import java.util.Locale;

/** Which entry of a full TLB set a miss replaces. */
public enum TlbReplacement {
    /** The entry used longest ago. */
    LRU,
    /** The entry inserted longest ago. */
    FIFO,
    /** Any entry, chosen at random. */
    RANDOM;

    /** Parses a configured value, naming the knob when the value is unknown. */
    public static TlbReplacement parse(String knob, String value) {
        try {
            return valueOf(value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(knob + " must be one of " + Arrays.toString(values()) + ", was '" + value + "'");
        }
    }
}
