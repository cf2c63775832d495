package io.pagewire.client;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongConsumer;

/**
 * A NetVM event counter on an endpoint: peers add to it (WRITE_WITH_NOTIFY adds one once the data is
 * visible; FETCH_ADD adds any value). Wait for it by polling, blocking, or a handler.
 */
public interface EventCounter extends AutoCloseable {
    int id();

    /** The value now (asks the node). */
    long value();

    /**
     * The value the node last delivered to this application, read from local memory with no call to
     * the node: NetVM's polling, the cheapest way to notice a notification. The first poll subscribes
     * to the counter's changes (and asks the node once, until its first report arrives); from then on
     * a poll is a read. It may trail {@link #value()} by the time a change takes to be delivered. With
     * shared-memory rings a poll reads the node's event ring itself, handling what else the node
     * delivered to the endpoint on this thread too, as {@link Endpoint#poll} does.
     */
    long poll();

    CompletableFuture<Long> valueAsync();

    /** Blocks until the counter reaches {@code target} or the timeout passes; returns the value then. */
    long await(long target, Duration timeout);

    /** Completes with the counter's value once it reaches {@code target}. */
    CompletableFuture<Long> awaitAsync(long target, Duration timeout);

    /** Calls the handler with each new value, in order, until the returned handle is closed. */
    AutoCloseable onChange(LongConsumer handler);

    /** Removes the counter: peers' notifications and FETCH_ADDs naming it fail from now on. */
    @Override
    void close();
}
