package io.pagewire.node.cm;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/** Where the connection manager's timeouts run: the node's scheduler, or a clock a test moves by hand. */
@FunctionalInterface
public interface CmTimers {
    /** Runs {@code task} once {@code delayMs} have passed, unless the handle returned cancels it first. */
    Timer schedule(long delayMs, Runnable task);

    /** A scheduled task that may still be cancelled. */
    @FunctionalInterface
    interface Timer {
        void cancel();
    }

    /** Timeouts on a scheduler's threads. */
    static CmTimers on(ScheduledExecutorService scheduler) {
        return (delayMs, task) -> {
            ScheduledFuture<?> future = scheduler.schedule(task, delayMs, TimeUnit.MILLISECONDS);
            return () -> future.cancel(false);
        };
    }
}
