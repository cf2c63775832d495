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
