package io.pagewire.kernel;

import java.util.Arrays;
import java.util.Locale;

/** The page replacement policies a node can be configured with. */
public enum PageReplacement {
    /** Second chance over frames: a frame whose accessed bit is set is spared once. */
    CLOCK,
    /** Round robin over frames, ignoring accessed bits: the baseline CLOCK is measured against. */
    FIFO;

    /** Parses a configured value, naming the knob when the value is unknown. */
    public static PageReplacement parse(String knob, String value) {
        try {
            return valueOf(value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(knob + " must be one of " + Arrays.toString(values()) + ", was '" + value + "'");
        }
    }

    PageReplacementPolicy newPolicy() {
        return switch (this) {
            case CLOCK -> new ClockReplacement();
            case FIFO -> new FifoReplacement();
        };
    }
}
