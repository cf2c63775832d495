package io.pagewire.kernel;

/** An operation of the kernel agent that could not be done; the message says what and why. */
public class KernelException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public KernelException(String message) {
        super(message);
    }

    public KernelException(String message, Throwable cause) {
        super(message, cause);
    }
}
