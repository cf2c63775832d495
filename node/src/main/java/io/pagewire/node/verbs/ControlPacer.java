package io.pagewire.node.verbs;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;

/**
 * Paces each caller's control-plane operations (session opens, allocations, registrations, queue
 * pairs, counters) to a rate with a burst, so that one client cannot keep the node's cores busy with
 * them while others wait: a caller within its rate is never slowed; one over it has its operation
 * started later (its call waits, using no thread), and one so far over that it would wait longer
 * than {@code maxDelayNs} is refused. Work requests, loads, stores and counter reads are not paced:
 * the data path has its own flow control.
 *
 * <p>The rule is the generic cell rate algorithm (virtual scheduling): each caller has a theoretical
 * time for its next operation, one interval further per operation; an operation may start up to
 * {@code burst - 1} intervals before that time.
 */
final class ControlPacer {
    /** What {@link #admit} answers for an operation that would wait too long: refuse it. */
    static final long REFUSE = -1;

    private final long intervalNs;
    private final long toleranceNs;
    private final long maxDelayNs;
    /** The time the pacer reads (System.nanoTime, or a test's own clock). */
    private final LongSupplier clock;
    private final ConcurrentHashMap<String, AtomicLong> nextTimes = new ConcurrentHashMap<>();
    /** Callers remembered before idle ones are forgotten. */
    static final int FORGET_ABOVE = 4096;
    private final LongAdder delayed = new LongAdder();
    private final LongAdder refused = new LongAdder();

    /**
     * @param perSecond operations a caller may start per second on average; 0 turns pacing off
     * @param burst operations a caller may start back to back before the rate applies
     */
    ControlPacer(double perSecond, int burst, long maxDelayNs) {
        this(perSecond, burst, maxDelayNs, System::nanoTime);
    }

    /** As above, reading the time from {@code clock} (nanoseconds). */
    ControlPacer(double perSecond, int burst, long maxDelayNs, LongSupplier clock) {
        this.clock = clock;
        this.intervalNs = perSecond <= 0 ? 0 : Math.max(1, (long) (1e9 / perSecond));
        this.toleranceNs = intervalNs * Math.max(0, burst - 1L);
        this.maxDelayNs = maxDelayNs;
    }

    /** Nanoseconds the caller's next operation must wait before it starts (0: now), or {@link #REFUSE}. */
    long admit(String caller) {
        if (intervalNs == 0) {
            return 0;
        }
        AtomicLong next = nextTimes.get(caller);
        if (next == null) {
            if (nextTimes.size() >= FORGET_ABOVE) {
                forgetIdleCallers();
            }
            next = nextTimes.computeIfAbsent(caller, c -> new AtomicLong(clock.getAsLong()));
        }
        while (true) {
            long now = clock.getAsLong();
            long scheduled = next.get();
            long base = scheduled - now > 0 ? scheduled : now;
            long wait = base - toleranceNs - now;
            if (wait > maxDelayNs) {
                refused.increment();
                return REFUSE;
            }
            if (next.compareAndSet(scheduled, base + intervalNs)) {
                if (wait > 0) {
                    delayed.increment();
                    return wait;
                }
                return 0;
            }
        }
    }

    /**
     * Drops callers whose next time has passed: such a caller is paced exactly as one never seen (a full
     * burst), so many one-off callers (hosts, in plaintext) cannot grow the map.
     */
    private void forgetIdleCallers() {
        long now = clock.getAsLong();
        nextTimes.values().removeIf(next -> next.get() - now <= 0);
    }

    /** Callers the pacer remembers now. */
    int callersRemembered() {
        return nextTimes.size();
    }

    /** Whether pacing is on. */
    boolean enabled() {
        return intervalNs > 0;
    }

    /** Operations started later than asked, so far. */
    long delayed() {
        return delayed.sum();
    }

    /** Operations refused for waiting too long, so far. */
    long refused() {
        return refused.sum();
    }
}
