package io.pagewire.node.cm;

import io.pagewire.proto.fabric.CmMessage;

/**
 * A request to a peer's manager sent again every response timeout until its answer cancels the id's
 * timer (the InfiniBand CM's MAD retries), and the other timeouts of an id. Called under the
 * manager's lock; its timers take the lock themselves.
 */
final class CmRequests {
    private final CmOutbox outbox;
    private final CmTimers timers;
    private final CmTimings timings;
    private final CmCounters counters;

    CmRequests(CmOutbox outbox, CmTimers timers, CmTimings timings, CmCounters counters) {
        this.outbox = outbox;
        this.timers = timers;
        this.timings = timings;
        this.counters = counters;
    }

    /** Sends {@code message} to the id's peer until answered; when the retries run out, {@code gaveUp} runs (under the lock). */
    void sendUntilAnswered(CmId id, CmMessage message, Runnable gaveUp) {
        cancel(id);
        id.lastSent = message;
        id.retriesLeft = timings.retries();
        outbox.send(id.peerNode, message);
        id.timer = timers.schedule(timings.responseTimeoutMs(), new Runnable() {
            @Override
            public void run() {
                outbox.locked(() -> {
                    if (id.lastSent != message || id.state == CmId.State.DESTROYED) {
                        return;
                    }
                    if (id.retriesLeft-- <= 0) {
                        id.timer = null;
                        gaveUp.run();
                        return;
                    }
                    counters.resent++;
                    outbox.send(id.peerNode, message);
                    id.timer = timers.schedule(timings.responseTimeoutMs(), this);
                });
            }
        });
    }

    /** Runs {@code task} under the lock once {@code delayMs} have passed, unless the id's timer is cancelled first. */
    void after(CmId id, long delayMs, Runnable task) {
        id.timer = timers.schedule(delayMs, () -> outbox.locked(task));
    }

    /** The id's request was answered, or its wait is over: no more sends, no timeout. */
    void cancel(CmId id) {
        id.lastSent = null;
        if (id.timer != null) {
            id.timer.cancel();
            id.timer = null;
        }
    }
}
