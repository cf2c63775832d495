package io.pagewire.client.impl;

import io.pagewire.client.EventCounter;
import io.pagewire.proto.verbs.AwaitEventCounterRequest;
import io.pagewire.proto.verbs.DestroyEventCounterRequest;
import io.pagewire.proto.verbs.ReadEventCounterRequest;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;

/** {@link EventCounter} over gRPC: polls and waits are calls; handlers ride the session stream. */
final class GrpcEventCounter implements EventCounter {
    private final GrpcEndpoint endpoint;
    private final int id;
    private boolean closed;
    /** The last value the node delivered, for {@link #poll}, once {@link #reported} says there is one. */
    private volatile long delivered;
    private volatile boolean reported;
    /** The subscription that feeds {@link #delivered}, taken at the first poll. */
    private AutoCloseable subscription;

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
        synchronized (this) {
            if (subscription == null && !closed) {
                subscription = endpoint.watch(id, v -> {
                    delivered = v;
                    reported = true;
                });
            }
        }
        // Until the node's first report is here (a second watcher gets none until the next change), ask it.
        return reported ? delivered : value();
    }

    @Override
    public CompletableFuture<Long> valueAsync() {
        return Calls.<io.pagewire.proto.verbs.ReadEventCounterResponse>unary(o -> endpoint.connection().stub()
                .readEventCounter(ReadEventCounterRequest.newBuilder().setEndpoint(endpoint.ref()).setCounterId(id).build(), o))
                .thenApply(r -> r.getValue());
    }

    @Override
    public synchronized void close() {
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
        endpoint.join(Calls.<io.pagewire.proto.verbs.DestroyEventCounterResponse>unary(o -> endpoint.connection().stub()
                .destroyEventCounter(DestroyEventCounterRequest.newBuilder().setEndpoint(endpoint.ref()).setCounterId(id).build(), o)));
    }

    @Override
    public long await(long target, Duration timeout) {
        return endpoint.join(awaitAsync(target, timeout));
    }

    @Override
    public CompletableFuture<Long> awaitAsync(long target, Duration timeout) {
        AwaitEventCounterRequest request = AwaitEventCounterRequest.newBuilder().setEndpoint(endpoint.ref()).setCounterId(id)
                .setTarget(target).setTimeoutMs(timeout.toMillis()).build();
        return Calls.<io.pagewire.proto.verbs.AwaitEventCounterResponse>unary(o -> endpoint.connection().stub()
                        .withDeadlineAfter(timeout.toMillis() + 30_000, TimeUnit.MILLISECONDS).awaitEventCounter(request, o))
                .thenApply(r -> r.getValue());
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
