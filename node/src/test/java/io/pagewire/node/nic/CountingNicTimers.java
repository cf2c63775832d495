package io.pagewire.node.nic;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Threaded NIC timers that count what is scheduled and what is still to run, so a test can wait
 * for a NIC's timer work to end (the event) instead of sleeping and hoping it has.
 */
final class CountingNicTimers implements NicTimers {
    private final NicTimers threaded;
    private final AtomicInteger scheduled = new AtomicInteger();
    private final AtomicInteger pending = new AtomicInteger();
    private final Object idle = new Object();

    CountingNicTimers(String name) {
        threaded = NicTimers.threaded(name);
    }

    @Override
    public void schedule(long delayNs, Runnable task) {
        scheduled.incrementAndGet();
        pending.incrementAndGet();
        threaded.schedule(delayNs, () -> {
            try {
                task.run();
            } finally {
                if (pending.decrementAndGet() == 0) {
                    synchronized (idle) {
                        idle.notifyAll();
                    }
                }
            }
        });
    }

    /** Timer tasks scheduled so far. */
    int scheduled() {
        return scheduled.get();
    }

    /** Timer tasks scheduled and not yet run. */
    int pending() {
        return pending.get();
    }

    /**
     * Waits until no timer task is left to run: from then on the NIC schedules timer work only when
     * something outside the timers (a post, a packet) asks for it. Returns whether that happened in time.
     */
    boolean awaitIdle(long timeout, TimeUnit unit) throws InterruptedException {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        synchronized (idle) {
            for (long left = deadline - System.nanoTime(); pending.get() != 0; left = deadline - System.nanoTime()) {
                if (left <= 0) {
                    return false;
                }
                TimeUnit.NANOSECONDS.timedWait(idle, left);
            }
        }
        return true;
    }

    @Override
    public void close() {
        threaded.close();
    }
}
