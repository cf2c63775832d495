package io.pagewire.node.nic;

import java.util.Locale;
import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The values of the {@link NicCounter}s of one NIC, each kept per registration mode where a mode
 * applies (TLB, faults, RNR) and once otherwise; the metrics layer reads them.
 */
public final class NicCounters {
    private static final int COLUMNS = RegistrationMode.values().length + 1;
    private static final int NO_MODE = COLUMNS - 1;

    private final AtomicLongArray values = new AtomicLongArray(NicCounter.values().length * COLUMNS);
    private final AtomicLongArray completionStatuses = new AtomicLongArray(CompletionStatus.values().length);

    void increment(NicCounter counter) {
        values.incrementAndGet(counter.id() * COLUMNS + NO_MODE);
    }

    void add(NicCounter counter, long delta) {
        values.addAndGet(counter.id() * COLUMNS + NO_MODE, delta);
    }

    void add(NicCounter counter, RegistrationMode mode, long delta) {
        values.addAndGet(counter.id() * COLUMNS + mode.ordinal(), delta);
    }

    void increment(NicCounter counter, RegistrationMode mode) {
        values.incrementAndGet(counter.id() * COLUMNS + mode.ordinal());
    }

    void countCompletion(CompletionStatus status) {
        completionStatuses.incrementAndGet(status.ordinal());
        if (status != CompletionStatus.SUCCESS) {
            increment(NicCounter.COMPLETION_ERRORS);
        }
    }

    /** The counter's total over every mode. */
    public long get(NicCounter counter) {
        long sum = 0;
        for (int column = 0; column < COLUMNS; column++) {
            sum += values.get(counter.id() * COLUMNS + column);
        }
        return sum;
    }

    /** Packets sent again, whatever the cause. */
    public long retransmitted() {
        long sum = 0;
        for (NicCounter cause : NicCounter.RETRANSMISSIONS) {
            sum += get(cause);
        }
        return sum;
    }

    /** The counter's value for one registration mode. */
    public long get(NicCounter counter, RegistrationMode mode) {
        return values.get(counter.id() * COLUMNS + mode.ordinal());
    }

    /** Every non-zero counter, with its per-mode split, one per line: what a failing test prints. */
    @Override
    public String toString() {
        StringBuilder out = new StringBuilder();
        for (NicCounter counter : NicCounter.values()) {
            long total = get(counter);
            if (total == 0) {
                continue;
            }
            out.append(String.format("  %-26s %12d", counter.name().toLowerCase(Locale.ROOT), total));
            for (RegistrationMode mode : RegistrationMode.values()) {
                long v = get(counter, mode);
                if (v != 0 && v != total) {
                    out.append("  ").append(mode).append('=').append(v);
                } else if (v != 0) {
                    out.append("  (").append(mode).append(')');
                }
            }
            out.append('\n');
        }
        for (CompletionStatus status : CompletionStatus.values()) {
            if (completions(status) != 0) {
                out.append(String.format("  completions %-14s %12d%n", status, completions(status)));
            }
        }
        return out.toString();
    }

    /** Completions with one status, successes included. */
    public long completions(CompletionStatus status) {
        return completionStatuses.get(status.ordinal());
    }
}
