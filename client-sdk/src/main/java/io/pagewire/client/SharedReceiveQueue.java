package io.pagewire.client;

import java.util.concurrent.CompletableFuture;

/**
 * A shared receive queue (ibverbs' SRQ) of an endpoint: one pool of posted receives that every queue
 * pair created on it ({@link Endpoint#createQueuePair(SharedReceiveQueue)}) draws from, in posting
 * order, so an application posts buffers for the traffic it expects rather than per connection. A
 * receive completes with the queue pair whose SEND filled it.
 */
public interface SharedReceiveQueue extends AutoCloseable {
    int id();

    /** Posts a receive buffer to the pool; its future settles with the completion of the SEND that fills it. */
    CompletableFuture<Completion> postReceive(MemoryRegion region, long address, int length);

    /**
     * Runs {@code handler} once, on an SDK thread, when fewer than {@code limit} receives stay posted
     * (at once if that is already so): time to post more. Call again to re-arm, as with
     * {@code ibv_modify_srq}'s {@code srq_limit}; 0 disarms.
     */
    void onLimit(int limit, Runnable handler);

    /** Destroys it once no queue pair uses it; receives still posted fail as flushed. */
    @Override
    void close();
}
