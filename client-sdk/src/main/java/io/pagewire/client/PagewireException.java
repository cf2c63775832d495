package io.pagewire.client;

/**
 * Something Pagewire could not do; the message says what and how to fix it. Subclasses say which
 * kind of problem it was, so that a test can tell a protection error from a retry timeout.
 */
public class PagewireException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public PagewireException(String message) {
        super(message);
    }

    public PagewireException(String message, Throwable cause) {
        super(message, cause);
    }

    /** The request itself was wrong: bad key, address, length, mode or state. */
    public static final class InvalidRequestException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public InvalidRequestException(String message) {
            super(message);
        }
    }

    /** The endpoint, region, queue pair or counter named does not exist (or no longer does). */
    public static final class NotFoundException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public NotFoundException(String message) {
            super(message);
        }
    }

    /** A limit was reached: memlock, node pin limit, memory and swap, receive credits. */
    public static final class ResourceExhaustedException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public ResourceExhaustedException(String message) {
            super(message);
        }
    }

    /** The endpoint belongs to another session. */
    public static final class PermissionDeniedException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public PermissionDeniedException(String message) {
            super(message);
        }
    }

    /** The node cannot be reached, or the session ended. */
    public static final class UnavailableException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public UnavailableException(String message, Throwable cause) {
            super(message, cause);
        }
    }

    /** The peer refused the request: bad rkey, address outside its region, missing right, unknown counter. */
    public static final class RemoteAccessException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public RemoteAccessException(String message) {
            super(message);
        }
    }

    /** The peer could not execute the request (malformed, or its memory is exhausted). */
    public static final class RemoteOperationException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public RemoteOperationException(String message) {
            super(message);
        }
    }

    /** The local side of a request was wrong or became unusable (region freed, page fault failed). */
    public static final class LocalProtectionException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public LocalProtectionException(String message) {
            super(message);
        }
    }

    /** No acknowledgement after the configured retransmissions: the peer is unreachable. */
    public static final class RetryExceededException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public RetryExceededException(String message) {
            super(message);
        }
    }

    /** The receiver stayed not ready (page faults) past the RNR retry count. */
    public static final class ReceiverNotReadyException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public ReceiverNotReadyException(String message) {
            super(message);
        }
    }

    /** The request never ran: its queue pair had failed or was closed. */
    public static final class FlushedException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public FlushedException(String message) {
            super(message);
        }
    }

    /** A received message was longer than the receive buffer posted for it (ibverbs' local length error). */
    public static final class LengthException extends PagewireException {
        private static final long serialVersionUID = 1L;

        public LengthException(String message) {
            super(message);
        }
    }
}
