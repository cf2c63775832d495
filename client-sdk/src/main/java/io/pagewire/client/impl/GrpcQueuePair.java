package io.pagewire.client.impl;

import io.pagewire.client.Completion;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.QpAddress;
import io.pagewire.client.QueuePair;
import io.pagewire.client.QueuePairEvent;
import io.pagewire.client.Retries;
import io.pagewire.client.WorkRequest;
import io.pagewire.proto.verbs.ConnectQueuePairRequest;
import io.pagewire.proto.verbs.ConnectQueuePairResponse;
import io.pagewire.proto.verbs.DestroyQueuePairRequest;
import io.pagewire.proto.verbs.DestroyQueuePairResponse;
import io.pagewire.proto.verbs.ModifyQueuePairRequest;
import io.pagewire.proto.verbs.ModifyQueuePairResponse;
import io.pagewire.proto.verbs.SetQueuePairRateLimitRequest;
import io.pagewire.proto.verbs.SetQueuePairRateLimitResponse;
import io.pagewire.ring.RingIdler;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/** {@link QueuePair} over gRPC: posts travel on the endpoint's session stream, completions come back on it. */
final class GrpcQueuePair implements QueuePair {
    private final GrpcEndpoint endpoint;
    private final QpAddress address;
    private boolean closed;

    GrpcQueuePair(GrpcEndpoint endpoint, io.pagewire.proto.verbs.QpAddress address) {
        this.endpoint = endpoint;
        this.address = new QpAddress(address.getNodeId(), address.getQpn(), address.getInitialCredits(), address.getPageSize());
    }

    @Override
    public int qpn() {
        return address.qpn();
    }

    @Override
    public QpAddress address() {
        return address;
    }

    @Override
    public void connect(QpAddress peer) {
        endpoint.join(connectAsync(peer));
    }

    @Override
    public CompletableFuture<Void> connectAsync(QpAddress peer) {
        return Calls.<ConnectQueuePairResponse>unary(o -> endpoint.connection().stub().connectQueuePair(
                ConnectQueuePairRequest.newBuilder().setEndpoint(endpoint.ref()).setQpn(qpn()).setPeer(wire(peer)).build(), o)).thenApply(r -> null);
    }

    @Override
    public void connect(QpAddress peer, Retries retries) {
        ModifyQueuePairRequest.Builder rtr = modify(ModifyQueuePairRequest.State.READY_TO_RECEIVE).setPeer(wire(peer))
                .setRnrDelayNs(retries.rnrDelay().toNanos()).setAttributes(ModifyQueuePairRequest.Attribute.RNR_DELAY_VALUE);
        endpoint.join(modifyAsync(rtr));
        endpoint.join(modifyAsync(modify(ModifyQueuePairRequest.State.READY_TO_SEND).setAckTimeoutNs(retries.ackTimeout().toNanos())
                .setRetryCount(retries.retryCount()).setRnrRetryCount(retries.rnrRetryCount())
                .setAttributes(ModifyQueuePairRequest.Attribute.ACK_TIMEOUT_VALUE | ModifyQueuePairRequest.Attribute.RETRY_COUNT_VALUE
                        | ModifyQueuePairRequest.Attribute.RNR_RETRY_COUNT_VALUE)));
    }

    @Override
    public void moveToError() {
        endpoint.join(modifyAsync(modify(ModifyQueuePairRequest.State.ERROR)));
    }

    @Override
    public void reset() {
        // The node's RESET drops what is posted without completions; flushing first settles every future.
        moveToError();
        endpoint.join(modifyAsync(modify(ModifyQueuePairRequest.State.RESET)));
    }

    @Override
    public void drainSendQueue() {
        endpoint.join(modifyAsync(modify(ModifyQueuePairRequest.State.SEND_QUEUE_DRAINED)));
    }

    @Override
    public void resumeSending() {
        endpoint.join(modifyAsync(modify(ModifyQueuePairRequest.State.READY_TO_SEND)));
    }

    @Override
    public void onEvent(Consumer<QueuePairEvent> listener) {
        endpoint.listen(qpn(), listener);
    }

    private ModifyQueuePairRequest.Builder modify(ModifyQueuePairRequest.State state) {
        return ModifyQueuePairRequest.newBuilder().setEndpoint(endpoint.ref()).setQpn(qpn()).setState(state);
    }

    private CompletableFuture<ModifyQueuePairResponse> modifyAsync(ModifyQueuePairRequest.Builder request) {
        return Calls.<ModifyQueuePairResponse>unary(o -> endpoint.connection().stub().modifyQueuePair(request.build(), o));
    }

    private static io.pagewire.proto.verbs.QpAddress wire(QpAddress peer) {
        return io.pagewire.proto.verbs.QpAddress.newBuilder().setNodeId(peer.nodeId()).setQpn(peer.qpn())
                .setInitialCredits(peer.initialCredits()).setPageSize(peer.pageSize()).build();
    }

    @Override
    public void rateLimit(long bytesPerSecond, long burstBytes) {
        endpoint.join(Calls.<SetQueuePairRateLimitResponse>unary(o -> endpoint.connection().stub().setQueuePairRateLimit(
                SetQueuePairRateLimitRequest.newBuilder().setEndpoint(endpoint.ref()).setQpn(qpn())
                        .setBytesPerSecond(bytesPerSecond).setBurstBytes(burstBytes).build(), o)));
    }

    @Override
    public CompletableFuture<Completion> write(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey) {
        return post(List.of(WorkRequest.write(local, localAddress, length, remoteAddress, rkey))).get(0);
    }

    @Override
    public CompletableFuture<Completion> writeWithNotify(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey,
            int counterId) {
        return post(List.of(WorkRequest.writeWithNotify(local, localAddress, length, remoteAddress, rkey, counterId))).get(0);
    }

    @Override
    public CompletableFuture<Completion> read(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey) {
        return post(List.of(WorkRequest.read(local, localAddress, length, remoteAddress, rkey))).get(0);
    }

    @Override
    public CompletableFuture<Completion> fetchAdd(int counterId, long add) {
        return post(List.of(WorkRequest.fetchAdd(counterId, add))).get(0);
    }

    @Override
    public CompletableFuture<Completion> postReceive(MemoryRegion region, long address, int length) {
        return endpoint.postReceive(qpn(), 0, region, address, length);
    }

    @Override
    public List<CompletableFuture<Completion>> post(List<WorkRequest> requests) {
        return endpoint.post(qpn(), requests);
    }

    @Override
    public Completion await(CompletableFuture<Completion> completion) {
        boolean busyPoll = endpoint.connection().options().busyPoll();
        if (busyPoll && endpoint.usesRings()) {
            // Drain the event ring on this thread: the completion needs no other thread to reach us.
            // Spin a little, then yield between looks: on a small machine a waiter that never yields
            // starves the node threads that would bring its completion.
            long spinUntil = System.nanoTime() + Errors.SPIN_NS;
            while (!completion.isDone()) {
                endpoint.poll();
                RingIdler.backOff(spinUntil);
            }
        } else {
            // Blocking: this thread handles the ring's events and sleeps on its bell (no agent wakes it).
            endpoint.awaitEvents(completion, RingClient.NO_DEADLINE);
        }
        return Errors.join(completion, busyPoll, endpoint.connection().target());
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        endpoint.forget(qpn());
        endpoint.listen(qpn(), null);
        endpoint.join(Calls.<DestroyQueuePairResponse>unary(o -> endpoint.connection().stub().destroyQueuePair(
                DestroyQueuePairRequest.newBuilder().setEndpoint(endpoint.ref()).setQpn(qpn()).build(), o)));
    }

    @Override
    public String toString() {
        return "queue pair " + address;
    }
}
