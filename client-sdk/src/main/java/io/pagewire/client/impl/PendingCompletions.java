package io.pagewire.client.impl;

import io.pagewire.client.Completion;
import io.pagewire.client.Opcode;
import io.pagewire.client.PagewireException;
import io.pagewire.client.WorkRequest;
import io.pagewire.proto.verbs.CompletionEvent;
import io.pagewire.proto.verbs.CompletionStatus;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * An endpoint's posted work requests and receives that wait for their outcome: it gives each a fresh
 * work request id and a future, and settles the futures from what the node reports (completions,
 * refusals, receives dropped with their shared receive queue, the session's end), whichever way
 * they come (the session stream or the event ring). A completion also settles the unsignalled
 * requests its queue pair posted before it ({@link PostOrder}).
 */
final class PendingCompletions {
    private static final int SUCCESS = CompletionStatus.SUCCESS.getNumber();

    private final Map<Long, CompletableFuture<Completion>> pending = new ConcurrentHashMap<>();
    /** The work request ids of posted receives not yet completed (their completions skip the send queue's order). */
    private final Set<Long> pendingReceives = ConcurrentHashMap.newKeySet();
    private final Map<Integer, PostOrder> orders = new ConcurrentHashMap<>();
    private final AtomicLong nextWrId = new AtomicLong(1);

    /** The post order of queue pair {@code qpn}: a post takes its ids and sends under its {@link PostOrder#postLock}. */
    PostOrder order(int qpn) {
        return orders.computeIfAbsent(qpn, PostOrder::new);
    }

    /**
     * Gives each request an id (written to {@code wrIds}) and a future, and records the unsignalled
     * ones in the pair's order; call under the order's post lock.
     */
    List<CompletableFuture<Completion>> expect(PostOrder order, List<WorkRequest> requests, long[] wrIds) {
        int n = requests.size();
        List<CompletableFuture<Completion>> futures = new ArrayList<>(n);
        long first = nextWrId.getAndAdd(n);
        for (int i = 0; i < n; i++) {
            wrIds[i] = first + i;
            CompletableFuture<Completion> future = new CompletableFuture<>();
            pending.put(wrIds[i], future);
            futures.add(future);
            WorkRequest wr = requests.get(i);
            if (!wr.signaled()) {
                order.unsignaled(wrIds[i], wr.opcode(), wr.length());
            }
        }
        return futures;
    }

    /** A fresh id for a receive, whose future is {@link #receive}'s. */
    long nextReceiveId() {
        return nextWrId.getAndIncrement();
    }

    /** The future of receive {@code wrId}, which its completion settles. */
    CompletableFuture<Completion> receive(long wrId) {
        CompletableFuture<Completion> future = new CompletableFuture<>();
        pendingReceives.add(wrId);
        pending.put(wrId, future);
        return future;
    }

    /** The requests never reached the node: their futures fail with {@code e}. */
    void failed(long[] wrIds, RuntimeException e) {
        for (long wrId : wrIds) {
            pendingReceives.remove(wrId);
            CompletableFuture<Completion> future = pending.remove(wrId);
            if (future != null) {
                future.completeExceptionally(e);
            }
        }
    }

    /**
     * A completion from the stream or the event ring; a successful one builds no wire message. It first
     * settles the unsignalled requests of its queue pair posted before it.
     */
    void completed(long wrId, int qpn, int opcode, int status, long bytes, long value, String error, boolean hasImmediate, int immediate) {
        PostOrder order = orders.get(qpn);
        // A receive's completion says nothing about the send queue's order (and, flushed, may carry no opcode).
        if (order != null && !pendingReceives.remove(wrId)) {
            order.completed(wrId, this::impliedSuccess);
        }
        CompletableFuture<Completion> future = pending.remove(wrId);
        if (future == null) {
            return;
        }
        if (status == SUCCESS) {
            future.complete(new Completion(wrId, qpn, WireOpcodes.fromWire(opcode), bytes, value, hasImmediate, immediate));
        } else {
            future.completeExceptionally(Errors.fromCompletion(CompletionEvent.newBuilder().setWrId(wrId).setQpn(qpn)
                    .setOpcodeValue(opcode).setStatusValue(status).setError(error == null ? "" : error).build()));
        }
    }

    /** A completion message from the session stream. */
    void completed(CompletionEvent c) {
        completed(c.getWrId(), c.getQpn(), c.getOpcodeValue(), c.getStatusValue(), c.getBytes(), c.getValue(), c.getError(),
                c.getHasImmediate(), c.getImmediate());
    }

    private void impliedSuccess(long wrId, int qpn, Opcode opcode, int length) {
        CompletableFuture<Completion> future = pending.remove(wrId);
        if (future != null) {
            future.complete(new Completion(wrId, qpn, opcode, length, 0));
        }
    }

    /** A post the node refused: {@code code} (a gRPC status code) says why, a limit or a bad request. */
    void refused(long wrId, int code, String error) {
        failed(new long[] {wrId}, Errors.fromRefusal(code, error));
    }

    /** Receives the node dropped (their shared receive queue was destroyed): flushed. */
    void dropped(List<Long> wrIds, String reason) {
        for (long wrId : wrIds) {
            failed(new long[] {wrId}, new PagewireException.FlushedException(reason));
        }
    }

    /** The session ended: whatever still waits fails with {@code error} as its cause. */
    void sessionEnded(PagewireException error) {
        for (Long wrId : List.copyOf(pending.keySet())) {
            CompletableFuture<Completion> future = pending.remove(wrId);
            if (future != null) {
                future.completeExceptionally(new PagewireException.UnavailableException(
                        "the session ended before the request completed: " + error.getMessage(), error));
            }
        }
        pendingReceives.clear();
    }

    /** The queue pair is gone: its post order with it. */
    void forget(int qpn) {
        orders.remove(qpn);
    }

    /** Requests and receives still waiting. */
    int size() {
        return pending.size();
    }
}
