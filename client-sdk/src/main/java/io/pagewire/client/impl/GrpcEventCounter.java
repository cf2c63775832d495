package io.pagewire.client.impl;

import io.pagewire.client.EventCounter;
import io.pagewire.client.PagewireException;
import io.pagewire.proto.verbs.DestroyEventCounterRequest;
import io.pagewire.proto.verbs.DestroyEventCounterResponse;
import io.pagewire.proto.verbs.ReadEventCounterRequest;
import io.pagewire.proto.verbs.ReadEventCounterResponse;
import java.time.Duration;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.LongConsumer;

/**
 * {@link EventCounter} over gRPC. Polls and waits are local: the first of them subscribes to the
 * counter's changes (they ride the session stream or the event ring), a poll reads the last value
 * delivered, a wait is settled by the change that reaches its target. Reading the value is a call.
 */
final class GrpcEventCounter implements EventCounter {
    private final GrpcEndpoint endpoint;
    private final int id;
    private boolean closed;
    /** The last value the node delivered, once {@link #reported} says there is one. */
    private volatile long delivered;
    private volatile boolean reported;
    /** The subscription that feeds {@link #delivered}, taken at the first poll or wait. */
    private AutoCloseable subscription;
    /** Waits not yet settled, each for the first delivered value at or past its target. */
    private final Queue<Wait> waits = new ConcurrentLinkedQueue<>();

    /** One {@link #awaitAsync} in progress. */
    private record Wait(long target, CompletableFuture<Long> reached) {
    }

    GrpcEventCounter(GrpcEndpoint endpoint, int id) {
        this.endpoint = endpoint;
        this.id = id;
    }

    @Override
    public int id() {
        return id;
    }

    @Override
    public long value() {
        return endpoint.join(valueAsync());
    }

    @Override
    public long poll() {
        // On shared-memory rings the node's event ring is local memory: read it on this thread (as
        // Endpoint.poll does), so that a change is seen as soon as the node wrote it, no thread woken.
        endpoint.poll();
        if (reported) {
            return delivered;
        }
        subscribe();
        return endpoint.join(deliveredOrAsked());
    }

    /**
     * The delivered value, or, until the node's first report is here (a second watcher of a counter
     * gets none until its next change), the value asked of the node, taken as delivered.
     */
    private CompletableFuture<Long> deliveredOrAsked() {
        if (reported) {
            return CompletableFuture.completedFuture(delivered);
        }
        return valueAsync().thenApply(value -> {
            report(value, false);
            return delivered;
        });
    }

    /** Subscribes to the counter's changes, once. */
    private synchronized void subscribe() {
        if (subscription == null && !closed) {
            subscription = endpoint.watch(id, value -> {
                report(value, true);
                settle();
            });
        }
    }

    /**
     * Takes a value as the delivered one: a change the node delivered always, a value read from the
     * node only while no change has been delivered (a change is newer than any read that raced it).
     */
    private synchronized void report(long value, boolean change) {
        if (change || !reported) {
            delivered = value;
            reported = true;
        }
    }

    /** Settles the waits whose target the delivered value reaches. */
    private void settle() {
        if (!reported || waits.isEmpty()) {
            return;
        }
        long now = delivered;
        for (Wait wait : waits) {
            if (now >= wait.target() && waits.remove(wait)) {
                wait.reached().complete(now);
            }
        }
    }

    @Override
    public CompletableFuture<Long> valueAsync() {
        return Calls.<ReadEventCounterResponse>unary(o -> endpoint.connection().stub()
                .readEventCounter(ReadEventCounterRequest.newBuilder().setEndpoint(endpoint.ref()).setCounterId(id).build(), o))
                .thenApply(r -> r.getValue());
    }

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                return;
            }
            closed = true;
            if (subscription != null) {
                try {
                    subscription.close();
                } catch (Exception e) {
                    // The session is gone: so is the subscription.
                }
            }
        }
        for (Wait wait; (wait = waits.poll()) != null; ) {
            wait.reached().completeExceptionally(new PagewireException.InvalidRequestException(this + " was closed while waited for"));
        }
        endpoint.join(Calls.<DestroyEventCounterResponse>unary(o -> endpoint.connection().stub()
                .destroyEventCounter(DestroyEventCounterRequest.newBuilder().setEndpoint(endpoint.ref()).setCounterId(id).build(), o)));
    }

    /**
     * As {@link #awaitAsync}, with the deadline kept by the waiting thread itself (no timer is set
     * per wait). On shared-memory rings, unless busy-polling, the thread handles the session's events
     * and sleeps on its bell until the change that settles the wait: no thread is woken to wake it.
     */
    @Override
    public long await(long target, Duration timeout) {
        CompletableFuture<Long> reached = startWait(target);
        long timeoutNs = saturatedNanos(timeout);
        long deadlineNs = timeoutNs == Long.MAX_VALUE ? RingClient.NO_DEADLINE : System.nanoTime() + timeoutNs;
        if (!endpoint.connection().options().busyPoll()) {
            endpoint.awaitEvents(reached, deadlineNs);
        }
        // Settled by another thread (the ring's agent, the session stream's), or not before the deadline.
        RingClient.waitOnFuture(reached, deadlineNs);
        if (!reached.isDone()) {
            removeWait(reached);
            if (reached.cancel(false)) {
                // The timeout: not an error, the value then, as the node has it.
                return endpoint.join(valueAsync().exceptionallyCompose(error -> CompletableFuture.failedFuture(waitFailure(error))));
            }
        }
        return endpoint.join(reached);
    }

    /** A timeout in nanoseconds, Long.MAX_VALUE for one too long to count (none, in effect). */
    private static long saturatedNanos(Duration timeout) {
        try {
            return Math.max(0, timeout.toNanos());
        } catch (ArithmeticException tooLong) {
            return Long.MAX_VALUE;
        }
    }

    /**
     * A wait in local memory, as NetVM's blocking detection is: the change that reaches the target
     * settles it on the thread that delivers changes, with no call to the node. Before the first
     * change arrives the node is asked once; at the timeout it is asked for the value to return.
     */
    @Override
    public CompletableFuture<Long> awaitAsync(long target, Duration timeout) {
        CompletableFuture<Long> reached = startWait(target);
        CompletableFuture<Long> result = new CompletableFuture<>();
        reached.orTimeout(Math.max(0, timeout.toMillis()), TimeUnit.MILLISECONDS).whenComplete((value, error) -> {
            removeWait(reached);
            if (error == null) {
                result.complete(value);
            } else if (error instanceof TimeoutException) {
                // A wait that times out is not an error: it returns the value then, as the node has it.
                valueAsync().whenComplete((now, readError) -> {
                    if (readError == null) {
                        result.complete(now);
                    } else {
                        result.completeExceptionally(waitFailure(readError));
                    }
                });
            } else {
                result.completeExceptionally(error);
            }
        });
        return result;
    }

    /**
     * Begins a wait for the first delivered value at or past {@code target}: subscribes, registers it
     * with the endpoint (whose end fails it), and settles it at once if the value is there already.
     */
    private CompletableFuture<Long> startWait(long target) {
        synchronized (this) {
            if (closed) {
                return CompletableFuture.failedFuture(new PagewireException.InvalidRequestException(this + " is closed"));
            }
        }
        try {
            subscribe();
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e); // the session is gone: say so through the future, as a call would
        }
        Wait wait = new Wait(target, new CompletableFuture<>());
        waits.add(wait);
        endpoint.waiting(wait.reached());
        deliveredOrAsked().whenComplete((value, error) -> {
            if (error == null) {
                settle();
            } else if (waits.remove(wait)) {
                wait.reached().completeExceptionally(waitFailure(error));
            }
        });
        return wait.reached();
    }

    /** Forgets the wait whose future this is (settled, failed or given up). */
    private void removeWait(CompletableFuture<Long> reached) {
        waits.removeIf(w -> w.reached() == reached);
    }

    /**
     * What a call that failed during a wait becomes: the session's end when the endpoint closed
     * meanwhile (as {@link GrpcEndpoint} fails the waits it ends), else the call's error as the SDK
     * reports errors.
     */
    private PagewireException waitFailure(Throwable error) {
        if (endpoint.isClosed()) {
            return new PagewireException.UnavailableException("the session ended before the event counter reached its target", Errors.unwrap(error));
        }
        return Errors.fromStatus(error, endpoint.connection().target());
    }

    @Override
    public AutoCloseable onChange(LongConsumer handler) {
        return endpoint.watch(id, handler);
    }

    @Override
    public String toString() {
        return "event counter " + id + " of " + endpoint;
    }
}
