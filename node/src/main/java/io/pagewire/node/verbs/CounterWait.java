package io.pagewire.node.verbs;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.proto.verbs.AwaitEventCounterResponse;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongConsumer;

/**
 * One AwaitEventCounter call in progress, ended once by whichever comes first: the counter reaching
 * the target or the timeout (answered with the value), the caller cancelling (dropped), or the
 * session ending (answered UNAVAILABLE). Whatever ends it takes its handler off the counter and its
 * timer off the scheduler, so an abandoned wait keeps nothing until a timeout that may be days away.
 */
final class CounterWait implements LongConsumer {
    private final Session session;
    private final EventCounter counter;
    private final long target;
    private final StreamObserver<AwaitEventCounterResponse> response;
    private final AtomicBoolean over = new AtomicBoolean();
    private volatile ScheduledFuture<?> timer;

    private CounterWait(Session session, EventCounter counter, long target, StreamObserver<AwaitEventCounterResponse> response) {
        this.session = session;
        this.counter = counter;
        this.target = target;
        this.response = response;
    }

    /** Starts a wait for {@code counter} (of {@code session}) to reach {@code target}, answering at the latest after {@code timeoutMs}. */
    static void start(Session session, EventCounter counter, long target, long timeoutMs, StreamObserver<AwaitEventCounterResponse> response,
            ScheduledExecutorService scheduler) {
        CounterWait wait = new CounterWait(session, counter, target, response);
        if (response instanceof ServerCallStreamObserver<AwaitEventCounterResponse> call) {
            call.setOnCancelHandler(wait::end);
        }
        session.waiting(wait); // ends it at once if the session already ended
        counter.addHandler(wait);
        if (wait.over.get()) {
            counter.removeHandler(wait); // cancelled or ended while the handler was being added
        } else if (counter.value() >= target) {
            wait.answer();
        } else {
            wait.timer = scheduler.schedule(wait::answer, Math.max(0, timeoutMs), TimeUnit.MILLISECONDS);
            if (wait.over.get()) {
                wait.timer.cancel(false); // answered while the timer was being set
            }
        }
    }

    /** A new value of the counter. */
    @Override
    public void accept(long value) {
        if (value >= target) {
            answer();
        }
    }

    /** Answers with the counter's value now (the target reached, or the timeout). */
    private void answer() {
        if (end()) {
            long value = counter.value();
            response.onNext(AwaitEventCounterResponse.newBuilder().setValue(value).setReached(value >= target).build());
            response.onCompleted();
        }
    }

    /** The session ended while the wait was on. */
    void sessionEnded() {
        if (end()) {
            response.onError(Status.UNAVAILABLE.withDescription("the session of endpoint " + counter.endpoint().id()
                    + " ended while this wait for event counter " + counter.id() + " was on").asRuntimeException());
        }
    }

    /** Ends the wait, once, whoever ends it; says whether this call did. */
    private boolean end() {
        if (!over.compareAndSet(false, true)) {
            return false;
        }
        counter.removeHandler(this);
        ScheduledFuture<?> t = timer;
        if (t != null) {
            t.cancel(false);
        }
        session.waitEnded(this);
        return true;
    }
}
