package io.pagewire.node.nic;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A shared receive queue (ibverbs' SRQ): one pool of posted receives that several queue pairs of an
 * endpoint draw from, in posting order, so an application with many connections posts buffers for
 * the traffic it expects rather than for each connection. A low watermark ({@link #arm}) tells the
 * application when to refill it. A receive's completion goes to the completion queue of the queue pair
 * whose SEND consumed it.
 */
public final class SharedReceiveQueue implements AutoCloseable {
    private final int id;
    private final Endpoint endpoint;
    private final ReceiveQueue queue;
    private final Set<QueuePair> users = ConcurrentHashMap.newKeySet();
    private volatile boolean closed;

    SharedReceiveQueue(int id, Endpoint endpoint, int capacity) {
        this.id = id;
        this.endpoint = endpoint;
        this.queue = new ReceiveQueue(capacity);
    }

    /** Its id on the endpoint. */
    public int id() {
        return id;
    }

    public Endpoint endpoint() {
        return endpoint;
    }

    /** Posts receives, in order; a bad one is thrown (those before it stay posted). */
    public void post(List<ReceiveRequest> requests) {
        checkOpen();
        for (ReceiveRequest request : requests) {
            queue.post(endpoint, request);
        }
    }

    public void post(ReceiveRequest request) {
        post(List.of(request));
    }

    /** Receives posted and not yet consumed. */
    public int posted() {
        return queue.size();
    }

    /**
     * Arms the low watermark: {@code reached} runs once when fewer than {@code limit} receives stay
     * posted (at once if that is already so); zero disarms. Re-arm after each event, as with
     * {@code ibv_modify_srq}.
     */
    public void arm(int limit, Runnable reached) {
        if (limit < 0) {
            throw new NicException("an SRQ limit must not be negative, was " + limit);
        }
        queue.arm(limit, reached);
    }

    /**
     * Destroys it, dropping what is still posted (returned, so its owner can tell the application).
     *
     * @throws NicException while a queue pair still uses it (ibverbs refuses with EBUSY)
     */
    public List<ReceiveRequest> destroy() {
        if (!users.isEmpty()) {
            throw new NicException("shared receive queue " + id + " of " + endpoint + " is still used by " + users.size()
                    + " queue pair(s); destroy them first");
        }
        closed = true;
        endpoint.forget(this);
        return queue.drain().stream().map(ReceiveQueue.Posted::request).toList();
    }

    @Override
    public void close() {
        destroy();
    }

    ReceiveQueue queue() {
        return queue;
    }

    void attach(QueuePair qp) {
        checkOpen();
        users.add(qp);
    }

    void detach(QueuePair qp) {
        users.remove(qp);
    }

    boolean isClosed() {
        return closed;
    }

    private void checkOpen() {
        if (closed) {
            throw new NicException("shared receive queue " + id + " of " + endpoint + " was destroyed");
        }
    }

    @Override
    public String toString() {
        return "shared receive queue " + id + " of " + endpoint;
    }
}
