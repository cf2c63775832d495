package io.pagewire.kernel;

/** Data arrived for the system buffer with no free slot: a sender overran the credits it was granted. */
public final class SystemBufferFullException extends KernelException {
    private static final long serialVersionUID = 1L;

    public SystemBufferFullException(String message) {
        super(message);
    }
}
