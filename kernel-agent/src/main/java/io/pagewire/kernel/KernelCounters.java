package io.pagewire.kernel;

import java.util.EnumMap;
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

    /** Every counter's value, in declaration order. */
    public Map<KernelCounter, Long> snapshot() {
        Map<KernelCounter, Long> snapshot = new EnumMap<>(KernelCounter.class);
        for (KernelCounter counter : KernelCounter.values()) {
            snapshot.put(counter, get(counter));
        }
        return snapshot;
    }
}
