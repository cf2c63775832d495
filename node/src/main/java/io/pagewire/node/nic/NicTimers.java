package io.pagewire.node.nic;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;

/** Runs the NIC's delayed work (RNR back-off, the acknowledgement timeout sweep); injected so tests control time. */
public interface NicTimers extends AutoCloseable {
    /** Runs {@code task} once after {@code delayNs}. */
    void schedule(long delayNs, Runnable task);

    @Override
    void close();

    /** Timers on one daemon thread. */
    static NicTimers threaded(String name) {
        ScheduledThreadPoolExecutor executor = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "pagewire-nic-timer-" + name);
            t.setDaemon(true);
            return t;
        });
        executor.setRemoveOnCancelPolicy(true);
        return new NicTimers() {
            private final ScheduledExecutorService exec = executor;

            @Override
            public void schedule(long delayNs, Runnable task) {
                if (!exec.isShutdown()) {
                    exec.schedule(task, delayNs, TimeUnit.NANOSECONDS);
                }
            }

            @Override
            public void close() {
                exec.shutdownNow();
            }
        };
    }
}
