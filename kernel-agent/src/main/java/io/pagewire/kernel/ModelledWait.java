package io.pagewire.kernel;

import java.util.concurrent.locks.LockSupport;

/**
 * Waits out a modelled device's or handler's time to within a few microseconds. A park oversleeps by
 * the kernel's timer slack (50 us for an ordinary thread), which would make an 80 us swap read cost
 * 130 us; so the wait parks until the slack's length before its end and spins the rest.
 */
final class ModelledWait {
    /** What a park may oversleep by: Linux's default timer slack, and a little. */
    static final long PARK_SLACK_NS = 60_000;

    private ModelledWait() {
    }

    /** Returns at {@code deadlineNs} ({@link System#nanoTime}), or at once when the thread is interrupted (the agent is closing). */
    static void until(long deadlineNs, Object blocker) {
        for (long left = deadlineNs - System.nanoTime(); left > 0; left = deadlineNs - System.nanoTime()) {
            if (Thread.currentThread().isInterrupted()) {
                return;
            }
            if (left > PARK_SLACK_NS) {
                LockSupport.parkNanos(blocker, left - PARK_SLACK_NS);
            } else {
                Thread.onSpinWait();
            }
        }
    }
}
