package io.pagewire.client;

import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * A reliable connected queue pair to one queue pair on a peer node. Each operation returns a future
 * that completes when the NIC reports the work request finished, in posting order, or completes
 * exceptionally with a {@link PagewireException} naming what went wrong. A failed request moves the
 * queue pair to an error state, and the requests after it fail as flushed (as with RC queue pairs).
 */
public interface QueuePair extends AutoCloseable {
    int qpn();

    /** What a peer needs to connect to this queue pair. */
    QpAddress address();

    /** Connects to a queue pair on a peer node. */
    void connect(QpAddress peer);

    CompletableFuture<Void> connectAsync(QpAddress peer);

    /**
     * Connects to a queue pair on a peer node, retrying as {@code retries} says instead of as the node's
     * {@code pagewire.nic.*} settings do: a request to a peer that stays silent fails with
     * {@link PagewireException.RetryExceededException} after the timeout and its resends.
     */
    void connect(QpAddress peer, Retries retries);

    /**
     * Moves the queue pair to its error state (ibverbs' ERROR): every request and receive still posted
     * fails as flushed, in posting order, and so does everything posted later.
     */
    void moveToError();

    /**
     * Gives a fresh queue pair under the same number, ready to {@link #connect} again (ibverbs' RESET,
     * then INIT): what was still posted fails as flushed first.
     */
    void reset();

    /**
     * Stops starting new requests (ibverbs' SQD): those already under way finish, later ones wait for
     * {@link #resumeSending}; {@link QueuePairEvent#SEND_QUEUE_DRAINED} tells when the drain is done.
     */
    void drainSendQueue();

    /** Ends a drain: waiting requests go (back to RTS). */
    void resumeSending();

    /**
     * Who hears this queue pair's asynchronous events; one listener, called on the endpoint's event
     * thread, so it must not block. Null stops listening.
     */
    void onEvent(java.util.function.Consumer<QueuePairEvent> listener);

    CompletableFuture<Completion> write(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey);

    CompletableFuture<Completion> writeWithNotify(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey,
            int counterId);

    CompletableFuture<Completion> read(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey);

    CompletableFuture<Completion> fetchAdd(int counterId, long add);

    /** FETCH_ADD on the peer's 8-byte aligned word at {@code remoteAddress} (little-endian); the completion's value is the word before. */
    default CompletableFuture<Completion> fetchAdd(long remoteAddress, long rkey, long add) {
        return post(List.of(WorkRequest.fetchAdd(remoteAddress, rkey, add))).get(0);
    }

    /** Replaces the peer's 8-byte word with {@code swap} if it equals {@code compare}; the completion's value is the word before. */
    default CompletableFuture<Completion> compareSwap(long remoteAddress, long rkey, long compare, long swap) {
        return post(List.of(WorkRequest.compareSwap(remoteAddress, rkey, compare, swap))).get(0);
    }

    /** SEND of [localAddress, +length) into the peer's next posted receive; with none posted, the peer answers RNR and this retries. */
    default CompletableFuture<Completion> send(MemoryRegion local, long localAddress, int length) {
        return post(List.of(WorkRequest.send(local, localAddress, length))).get(0);
    }

    /** A SEND whose receive completion at the peer carries {@code immediate}. */
    default CompletableFuture<Completion> sendWithImm(MemoryRegion local, long localAddress, int length, int immediate) {
        return post(List.of(WorkRequest.sendWithImm(local, localAddress, length, immediate))).get(0);
    }

    /** An RDMA WRITE that then consumes the peer's next posted receive, completing it with {@code immediate}. */
    default CompletableFuture<Completion> writeWithImm(MemoryRegion local, long localAddress, int length, long remoteAddress, long rkey,
            int immediate) {
        return post(List.of(WorkRequest.writeWithImm(local, localAddress, length, remoteAddress, rkey, immediate))).get(0);
    }

    /**
     * Posts a receive buffer, [address, +length) of a region with LOCAL_WRITE (ibverbs' {@code ibv_post_recv}):
     * the next SEND from the peer lands in it, in posting order. The future completes with opcode RECV
     * (bytes received, immediate data if sent) or RECV_RDMA_WITH_IMM, or exceptionally: a
     * {@link PagewireException.LengthException} for a message longer than the buffer, flushed when the queue
     * pair fails or closes. May be posted before the queue pair connects.
     */
    CompletableFuture<Completion> postReceive(MemoryRegion region, long address, int length);

    /** Posts several work requests in one message; one future per request, in order. */
    List<CompletableFuture<Completion>> post(List<WorkRequest> requests);

    /**
     * Waits for a completion: spinning when the connection busy-polls, sleeping otherwise.
     *
     * @throws PagewireException the request's error
     */
    Completion await(CompletableFuture<Completion> completion);

    /**
     * Paces what this queue pair sends, as ibverbs' {@code ibv_modify_qp_rate_limit}: at most
     * {@code bytesPerSecond} (payload, requested READ bytes and 64 bytes of headers per packet), with
     * {@code burstBytes} back to back after a pause (0: the node's per-session burst). A rate of 0
     * removes the limit. Requests stay posted and complete later; the node's per-session allowance,
     * where it sets one, applies as well.
     *
     * @throws PagewireException.InvalidRequestException for a negative rate or a burst beyond 1 GiB
     */
    void rateLimit(long bytesPerSecond, long burstBytes);

    /** Closes the queue pair; what is still posted fails as flushed. */
    @Override
    void close();
}
