package io.pagewire.node.verbs;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.pagewire.kernel.BadAddressException;
import io.pagewire.kernel.KernelException;
import io.pagewire.kernel.MemoryExhaustedException;
import io.pagewire.kernel.PinLimitExceededException;
import io.pagewire.kernel.SystemBufferFullException;
import io.pagewire.node.nic.NicException;
import io.pagewire.node.nic.QuotaExceededException;
import java.util.concurrent.CompletionException;

/**
 * Turns what went wrong in the node into a gRPC status a person can act on: the code says what
 * kind of problem, the description says what to fix. A stack trace never crosses the wire.
 */
final class StatusMapping {
    private static final System.Logger LOG = System.getLogger(StatusMapping.class.getName());
    /**
     * The longest description sent: an error that quotes the caller's input whole (a long name, a
     * huge field) would otherwise grow the response trailers past HTTP/2's header limit and break
     * the other calls on the same connection.
     */
    static final int MAX_DESCRIPTION_CHARS = 1024;

    private StatusMapping() {
    }

    static StatusRuntimeException toStatus(Throwable t) {
        Throwable cause = t instanceof CompletionException && t.getCause() != null ? t.getCause() : t;
        if (cause instanceof StatusRuntimeException status) {
            String description = status.getStatus().getDescription();
            return description == null || description.length() <= MAX_DESCRIPTION_CHARS ? status
                    : status.getStatus().withDescription(bounded(description)).asRuntimeException();
        }
        Status status;
        if (cause instanceof PinLimitExceededException || cause instanceof MemoryExhaustedException
                || cause instanceof SystemBufferFullException || cause instanceof QuotaExceededException) {
            status = Status.RESOURCE_EXHAUSTED;
        } else if (cause instanceof BadAddressException || cause instanceof NicException || cause instanceof IllegalArgumentException) {
            status = Status.INVALID_ARGUMENT;
        } else if (cause instanceof KernelException) {
            status = Status.FAILED_PRECONDITION;
        } else {
            LOG.log(System.Logger.Level.ERROR, "verbs call failed unexpectedly", cause);
            return Status.INTERNAL.withDescription(bounded("internal error in the node: " + cause.getClass().getSimpleName() + ": "
                    + cause.getMessage())).asRuntimeException();
        }
        return status.withDescription(bounded(cause.getMessage())).asRuntimeException();
    }

    /** A description cut to {@link #MAX_DESCRIPTION_CHARS}, saying so. */
    static String bounded(String description) {
        if (description == null || description.length() <= MAX_DESCRIPTION_CHARS) {
            return description;
        }
        return description.substring(0, MAX_DESCRIPTION_CHARS) + "... (" + (description.length() - MAX_DESCRIPTION_CHARS) + " more characters)";
    }
}
