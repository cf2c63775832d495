package io.pagewire.node.cm;

import java.util.PriorityQueue;

/** The connection manager's timers on a clock the test moves: a timeout fires in {@link #advance}, on the test's thread, never before. */
final class ManualCmTimers implements CmTimers {
    private record Due(long atMs, long order, Runnable task) {
    }

    private final PriorityQueue<Due> due = new PriorityQueue<>((a, b) -> a.atMs != b.atMs ? Long.compare(a.atMs, b.atMs) : Long.compare(a.order, b.order));
    private long nowMs;
    private long scheduled;

    @Override
    public synchronized Timer schedule(long delayMs, Runnable task) {
        Due entry = new Due(nowMs + delayMs, scheduled++, task);
        due.add(entry);
        return () -> {
            synchronized (this) {
                due.remove(entry);
            }
        };
    }

    /** Moves the clock on by {@code ms}, running every task due by then (those they schedule too) in the order they fall due. */
    void advance(long ms) {
        long until;
        synchronized (this) {
            until = nowMs + ms;
        }
        while (true) {
            Due next;
            synchronized (this) {
                next = due.peek();
                if (next == null || next.atMs > until) {
                    nowMs = until;
                    return;
                }
                due.poll();
                nowMs = next.atMs;
            }
            next.task.run(); // outside this monitor: the task takes the manager's lock
        }
    }
}
