package io.pagewire.client.impl;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.Status;
import io.pagewire.client.PagewireException;
import io.pagewire.proto.verbs.CompletionEvent;
import io.pagewire.proto.verbs.CompletionStatus;
import io.pagewire.proto.verbs.WorkRequest;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import org.junit.jupiter.api.Test;

class ErrorsTest {
    @Test
    void statusesBecomeTypedExceptionsKeepingTheNodesMessage() {
        assertThat(Errors.fromStatus(Status.INVALID_ARGUMENT.withDescription("range 0x10+8 is not allocated").asRuntimeException(), "n:1"))
                .isInstanceOf(PagewireException.InvalidRequestException.class).hasMessage("range 0x10+8 is not allocated");
        assertThat(Errors.fromStatus(Status.RESOURCE_EXHAUSTED.withDescription("memlock limit").asRuntimeException(), "n:1"))
                .isInstanceOf(PagewireException.ResourceExhaustedException.class);
        assertThat(Errors.fromStatus(Status.NOT_FOUND.withDescription("endpoint 9").asRuntimeException(), "n:1"))
                .isInstanceOf(PagewireException.NotFoundException.class);
        assertThat(Errors.fromStatus(Status.PERMISSION_DENIED.withDescription("other session").asRuntimeException(), "n:1"))
                .isInstanceOf(PagewireException.PermissionDeniedException.class);
        assertThat(Errors.fromStatus(new CompletionException(Status.UNAVAILABLE.withDescription("io").asRuntimeException()), "host:7100"))
                .isInstanceOf(PagewireException.UnavailableException.class).hasMessage("node at host:7100 did not answer: io");
    }

    @Test
    void failedCompletionsBecomeTypedExceptionsNamingTheRequest() {
        CompletionEvent event = CompletionEvent.newBuilder().setWrId(5).setQpn(3).setOpcode(WorkRequest.Opcode.WRITE)
                .setStatus(CompletionStatus.REMOTE_ACCESS_ERROR).setError("rkey 0x1f2e is not registered").build();
        assertThat(Errors.fromCompletion(event)).isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessage("WRITE (wr 5 on queue pair 3) REMOTE_ACCESS_ERROR: rkey 0x1f2e is not registered");
        for (CompletionStatus status : new CompletionStatus[] {CompletionStatus.RETRY_EXCEEDED, CompletionStatus.RNR_RETRY_EXCEEDED,
            CompletionStatus.FLUSHED, CompletionStatus.REMOTE_OPERATIONAL_ERROR, CompletionStatus.LOCAL_PROTECTION_ERROR}) {
            assertThat(Errors.fromCompletion(event.toBuilder().setStatus(status).build())).isNotExactlyInstanceOf(PagewireException.class);
        }
    }

    @Test
    void joiningAFailedFutureThrowsTheTypedException() {
        CompletableFuture<String> failed = CompletableFuture.failedFuture(Status.NOT_FOUND.withDescription("gone").asRuntimeException());
        try {
            Errors.join(failed, true, "n:1");
        } catch (PagewireException.NotFoundException e) {
            assertThat(e).hasMessage("gone");
            return;
        }
        throw new AssertionError("expected NotFoundException");
    }
}
