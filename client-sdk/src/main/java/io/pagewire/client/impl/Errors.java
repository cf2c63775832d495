package io.pagewire.client.impl;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.pagewire.client.PagewireException;
import io.pagewire.proto.verbs.CompletionEvent;
import io.pagewire.ring.RingIdler;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** Turns gRPC statuses and failed completions into the SDK's typed exceptions, keeping the node's message. */
final class Errors {
    private Errors() {
    }

    static PagewireException fromStatus(Throwable t, String target) {
        Throwable cause = unwrap(t);
        if (cause instanceof PagewireException p) {
            return p;
        }
        if (!(cause instanceof StatusRuntimeException sre)) {
            return new PagewireException(cause.getClass().getSimpleName() + ": " + cause.getMessage(), cause);
        }
        Status status = sre.getStatus();
        String message = status.getDescription() == null ? status.getCode().toString() : status.getDescription();
        return switch (status.getCode()) {
            case INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE -> new PagewireException.InvalidRequestException(message);
            case NOT_FOUND -> new PagewireException.NotFoundException(message);
            case RESOURCE_EXHAUSTED -> new PagewireException.ResourceExhaustedException(message);
            case PERMISSION_DENIED -> new PagewireException.PermissionDeniedException(message);
            case UNAVAILABLE, CANCELLED, DEADLINE_EXCEEDED -> new PagewireException.UnavailableException(
                    "node at " + target + " did not answer: " + message + securityHint(status), sre);
            default -> new PagewireException(status.getCode() + ": " + message, sre);
        };
    }

    /**
     * A post the node refused, typed by why: a limit (a full queue, a quota, the caller's share of a
     * node-wide pool) is {@code ResourceExhaustedException}, anything else an invalid request.
     *
     * @param code the refusal's gRPC status code (0, from a node that sends none: invalid)
     */
    static PagewireException fromRefusal(int code, String message) {
        Status.Code status = code == 0 ? Status.Code.INVALID_ARGUMENT : Status.fromCodeValue(code).getCode();
        return status == Status.Code.RESOURCE_EXHAUSTED ? new PagewireException.ResourceExhaustedException(message)
                : new PagewireException.InvalidRequestException(message);
    }

    /** What an unanswered call may mean about TLS: the status gRPC gives says nothing of it. */
    private static String securityHint(Status status) {
        for (Throwable c = status.getCause(); c != null; c = c.getCause()) {
            if (c instanceof javax.net.ssl.SSLException) {
                return " (the TLS handshake failed: " + c.getMessage() + "; the certificates must come from the node's CA and the node's"
                        + " must name the address or ClientSecurity's server name)";
            }
        }
        String description = status.getDescription();
        if (status.getCode() == Status.Code.UNAVAILABLE && description != null && description.startsWith("Network closed for unknown reason")) {
            return " (a node that runs mutual TLS closes a plaintext connection like this: connect with its CA and a certificate,"
                    + " ConnectOptions.withSecurity or PAGEWIRE_SECURITY_CERTIFICATE_DIRECTORY)";
        }
        return "";
    }

    static PagewireException fromCompletion(CompletionEvent c) {
        String message = c.getOpcode() + " (wr " + c.getWrId() + " on queue pair " + c.getQpn() + ") " + c.getStatus() + ": " + c.getError();
        return switch (c.getStatus()) {
            case LOCAL_PROTECTION_ERROR, MEMORY_WINDOW_BIND_ERROR -> new PagewireException.LocalProtectionException(message);
            case LOCAL_MEMORY_ERROR -> new PagewireException.LocalProtectionException(message);
            case REMOTE_ACCESS_ERROR -> new PagewireException.RemoteAccessException(message);
            case REMOTE_INVALID_REQUEST_ERROR, REMOTE_OPERATIONAL_ERROR -> new PagewireException.RemoteOperationException(message);
            case RETRY_EXCEEDED -> new PagewireException.RetryExceededException(message);
            case RNR_RETRY_EXCEEDED -> new PagewireException.ReceiverNotReadyException(message);
            case FLUSHED -> new PagewireException.FlushedException(message);
            case LOCAL_LENGTH_ERROR -> new PagewireException.LengthException(message);
            default -> new PagewireException(message);
        };
    }

    static Throwable unwrap(Throwable t) {
        Throwable cause = t;
        while ((cause instanceof CompletionException || cause instanceof ExecutionException) && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    /** How long a busy-polling waiter spins before it yields between looks. */
    static final long SPIN_NS = 20_000;

    /** Waits for a future and rethrows its failure as the SDK's exception. */
    static <T> T join(CompletableFuture<T> future, boolean spin, String target) {
        if (spin) {
            long spinUntil = System.nanoTime() + SPIN_NS;
            while (!future.isDone()) {
                RingIdler.backOff(spinUntil);
            }
        }
        try {
            return future.join();
        } catch (CompletionException | CancellationException e) {
            throw fromStatus(e, target);
        }
    }
}
