package io.pagewire.kernel;

import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLongArray;

/** The values of the {@link KernelCounter}s of one kernel agent; the metrics layer reads them. */
public final class KernelCounters {
    private final AtomicLongArray values = new AtomicLongArray(KernelCounter.values().length);

    void increment(KernelCounter counter) {
        values.incrementAndGet(counter.id());
    }

    void add(KernelCounter counter, long delta) {
        values.addAndGet(counter.id(), delta);
    }

    public long get(KernelCounter counter) {
        return values.get(counter.id());
    }

    /** Every non-zero counter, one per line: what a failing test prints. */
    @Override
    public String toString() {
        StringBuilder out = new StringBuilder();
        for (KernelCounter counter : KernelCounter.values()) {
            long value = get(counter);
            if (value != 0) {
                out.append(String.format("  %-26s %12d%n", counter.name().toLowerCase(Locale.ROOT), value));
            }
        }
        return out.toString();
    }

    /** Every counter's value, in declaration order. */
    public Map<KernelCounter, Long> snapshot() {
        Map<KernelCounter, Long> snapshot = new EnumMap<>(KernelCounter.class);
        for (KernelCounter counter : KernelCounter.values()) {
            snapshot.put(counter, get(counter));
        }
        return snapshot;
    }
}
