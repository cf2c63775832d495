package io.pagewire.client.impl;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Completion;
import io.pagewire.client.Opcode;
import io.pagewire.client.PagewireException;
import io.pagewire.client.WorkRequest;
import io.pagewire.proto.verbs.CompletionStatus;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

/** Completion routing of an endpoint: which future each thing the node reports settles, and how. */
class PendingCompletionsTest {
    private static final int QPN = 7;
    private static final int SUCCESS = CompletionStatus.SUCCESS.getNumber();
    private final PendingCompletions pending = new PendingCompletions();

    private static WorkRequest write(int length) {
        return WorkRequest.write(null, 0x1000, length, 0x2000, 5);
    }

    private List<CompletableFuture<Completion>> post(long[] wrIds, WorkRequest... requests) {
        PostOrder order = pending.order(QPN);
        synchronized (order.postLock) {
            return pending.expect(order, List.of(requests), wrIds);
        }
    }

    private static Throwable failure(CompletableFuture<?> future) {
        assertThat(future).isCompletedExceptionally();
        try {
            future.join();
            throw new AssertionError("not failed");
        } catch (CompletionException e) {
            return e.getCause();
        }
    }

    @Test
    void aCompletionSettlesItsRequestWithWhatTheNodeReported() {
        long[] wrIds = new long[2];
        List<CompletableFuture<Completion>> futures = post(wrIds, write(64), write(128));
        assertThat(wrIds[1]).isEqualTo(wrIds[0] + 1);
        pending.completed(wrIds[1], QPN, WireOpcodes.toWire(Opcode.WRITE), SUCCESS, 128, 0, null, true, 42);
        assertThat(futures.get(1).join()).isEqualTo(new Completion(wrIds[1], QPN, Opcode.WRITE, 128, 0, true, 42));
        // The first was signalled: the second's completion says nothing about it.
        assertThat(futures.get(0)).isNotDone();
        pending.completed(wrIds[0], QPN, WireOpcodes.toWire(Opcode.WRITE), CompletionStatus.REMOTE_ACCESS_ERROR.getNumber(), 0, 0,
                "rkey 5 is not valid", false, 0);
        assertThat(failure(futures.get(0))).isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessageContaining("rkey 5 is not valid");
        assertThat(pending.size()).isZero();
    }

    @Test
    void aCompletionImpliesTheSuccessOfTheUnsignalledRequestsPostedBeforeIt() {
        long[] wrIds = new long[3];
        List<CompletableFuture<Completion>> futures = post(wrIds, write(64).unsignaled(), write(32).unsignaled(), write(16));
        long[] later = new long[1];
        List<CompletableFuture<Completion>> after = post(later, write(8).unsignaled());
        pending.completed(wrIds[2], QPN, WireOpcodes.toWire(Opcode.WRITE), SUCCESS, 16, 0, null, false, 0);
        assertThat(futures.get(0).join()).isEqualTo(new Completion(wrIds[0], QPN, Opcode.WRITE, 64, 0));
        assertThat(futures.get(1).join()).isEqualTo(new Completion(wrIds[1], QPN, Opcode.WRITE, 32, 0));
        assertThat(futures.get(2).join().bytes()).isEqualTo(16);
        assertThat(after.get(0)).as("posted after the completion's request").isNotDone();
    }

    @Test
    void aReceivesCompletionSaysNothingAboutTheSendQueuesOrder() {
        long[] wrIds = new long[1];
        List<CompletableFuture<Completion>> sends = post(wrIds, write(64).unsignaled());
        long receiveId = pending.nextReceiveId();
        CompletableFuture<Completion> receive = pending.receive(receiveId);
        assertThat(receiveId).isGreaterThan(wrIds[0]);
        pending.completed(receiveId, QPN, WireOpcodes.toWire(Opcode.RECV), SUCCESS, 100, 0, null, false, 0);
        assertThat(receive.join().opcode()).isEqualTo(Opcode.RECV);
        assertThat(sends.get(0)).isNotDone();
    }

    @Test
    void refusalsDropsAndPostsThatNeverLeftFailTheirFutures() {
        long[] wrIds = new long[3];
        List<CompletableFuture<Completion>> futures = post(wrIds, write(1), write(2), write(3));
        pending.refused(wrIds[0], io.grpc.Status.Code.RESOURCE_EXHAUSTED.value(), "the send queue is full");
        pending.refused(wrIds[1], 0, "bad opcode");
        assertThat(failure(futures.get(0))).isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessage("the send queue is full");
        assertThat(failure(futures.get(1))).isInstanceOf(PagewireException.InvalidRequestException.class);
        RuntimeException lost = new PagewireException.UnavailableException("the stream is gone", null);
        pending.failed(new long[] {wrIds[2]}, lost);
        assertThat(failure(futures.get(2))).isSameAs(lost);

        long receiveId = pending.nextReceiveId();
        CompletableFuture<Completion> receive = pending.receive(receiveId);
        pending.dropped(List.of(receiveId, 999_999L), "its shared receive queue was destroyed");
        assertThat(failure(receive)).isInstanceOf(PagewireException.FlushedException.class)
                .hasMessage("its shared receive queue was destroyed");
        // Whatever arrives later for a settled or unknown id settles nothing.
        pending.completed(wrIds[0], QPN, WireOpcodes.toWire(Opcode.WRITE), SUCCESS, 1, 0, null, false, 0);
        pending.completed(123_456L, QPN, WireOpcodes.toWire(Opcode.WRITE), SUCCESS, 1, 0, null, false, 0);
        assertThat(pending.size()).isZero();
    }

    @Test
    void theSessionsEndFailsEverythingStillWaitingWithItsCause() {
        long[] wrIds = new long[2];
        List<CompletableFuture<Completion>> futures = post(wrIds, write(1).unsignaled(), write(2));
        CompletableFuture<Completion> receive = pending.receive(pending.nextReceiveId());
        PagewireException cause = new PagewireException.UnavailableException("the node restarted", null);
        pending.sessionEnded(cause);
        for (CompletableFuture<Completion> f : List.of(futures.get(0), futures.get(1), receive)) {
            assertThat(failure(f)).isInstanceOf(PagewireException.UnavailableException.class)
                    .hasMessageContaining("the session ended before the request completed: the node restarted").hasCause(cause);
        }
        assertThat(pending.size()).isZero();
    }
}
