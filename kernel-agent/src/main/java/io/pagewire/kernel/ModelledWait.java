package io.pagewire.kernel;

import java.util.concurrent.locks.LockSupport;

/**
 * Spends a modelled cost to within a few microseconds: a device's or handler's wait ({@link #until}),
 * or the CPU time of work the emulator does not do by nature ({@link #busyFor}). A park oversleeps by
 * the kernel's timer slack (50 us for an ordinary thread), which would make an 80 us swap read cost
 * 130 us; so a wait parks until the slack's length before its end and spins the rest.
 */
public final class ModelledWait {
    /** What a park may oversleep by: Linux's default timer slack, and a little. */
    static final long PARK_SLACK_NS = 60_000;

    private ModelledWait() {
    }

    /** Keeps the calling thread busy for {@code nanos}: work that is the CPU's (or the NIC's), not a wait for a device. */
    public static void busyFor(long nanos) {
        if (nanos <= 0) {
            return;
        }
        long done = System.nanoTime() + nanos;
        while (System.nanoTime() - done < 0) {
            Thread.onSpinWait();
        }
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
