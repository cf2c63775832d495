package io.pagewire.kernel;

/** A source of monotonic time in nanoseconds, injected so that timeouts are testable without sleeping. */
@FunctionalInterface
public interface NanoClock {
    /** The system's monotonic clock. */
    NanoClock SYSTEM = System::nanoTime;

    /** Monotonic time in nanoseconds; only differences are meaningful. */
    long nanoTime();
}
