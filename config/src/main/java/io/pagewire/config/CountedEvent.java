package io.pagewire.config;

import java.util.List;

/**
 * An event a component counts, declared once with the meter series that exports it: a constant of a
 * counter enum ({@code KernelCounter.SWAP_INS}) names its meter and its series' tags, and the node's
 * metrics bind every constant by iterating the enum.
 */
public interface CountedEvent {
    /** The meter the count is exported as. */
    Meter meter();

    /** The series' tags, as key, value, key, value... (empty for a meter of one series). */
    List<String> tags();

    /** What the count is multiplied by when exported (a count of nanoseconds exported in seconds: 1e-9). */
    default double scale() {
        return 1;
    }
}
