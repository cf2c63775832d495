package io.pagewire.client.impl;

import io.pagewire.client.Completion;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.SharedReceiveQueue;
import io.pagewire.proto.verbs.ArmSharedReceiveQueueRequest;
import io.pagewire.proto.verbs.ArmSharedReceiveQueueResponse;
import io.pagewire.proto.verbs.DestroySharedReceiveQueueRequest;
import io.pagewire.proto.verbs.DestroySharedReceiveQueueResponse;
import java.util.concurrent.CompletableFuture;

/** {@link SharedReceiveQueue} over gRPC: posts travel on the endpoint's session stream, the limit event comes back on it. */
final class GrpcSharedReceiveQueue implements SharedReceiveQueue {
    private final GrpcEndpoint endpoint;
    private final int id;
    private volatile Runnable limitHandler;
    private boolean closed;

    GrpcSharedReceiveQueue(GrpcEndpoint endpoint, int id) {
        this.endpoint = endpoint;
        this.id = id;
    }

    @Override
    public int id() {
        return id;
    }

    @Override
    public CompletableFuture<Completion> postReceive(MemoryRegion region, long address, int length) {
        return endpoint.postReceive(0, id, region, address, length);
    }

    @Override
    public void onLimit(int limit, Runnable handler) {
        if (limit < 0) {
            throw new IllegalArgumentException("an SRQ limit must not be negative, was " + limit);
        }
        limitHandler = limit == 0 ? null : handler;
        endpoint.join(Calls.<ArmSharedReceiveQueueResponse>unary(o -> endpoint.connection().stub().armSharedReceiveQueue(
                ArmSharedReceiveQueueRequest.newBuilder().setEndpoint(endpoint.ref()).setSrqId(id).setLimit(limit).build(), o)));
    }

    /** The node reported the limit reached: the armed handler runs once. */
    void limitReached() {
        Runnable handler = limitHandler;
        limitHandler = null;
        if (handler != null) {
            handler.run();
        }
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        DestroySharedReceiveQueueResponse response = endpoint.join(Calls.<DestroySharedReceiveQueueResponse>unary(o -> endpoint.connection()
                .stub().destroySharedReceiveQueue(DestroySharedReceiveQueueRequest.newBuilder().setEndpoint(endpoint.ref()).setSrqId(id).build(), o)));
        closed = true;
        endpoint.forget(this);
        endpoint.dropped(response.getDroppedWrIdsList(), "shared receive queue " + id + " was destroyed before a SEND filled this receive");
    }

    @Override
    public String toString() {
        return "shared receive queue " + id;
    }
}
