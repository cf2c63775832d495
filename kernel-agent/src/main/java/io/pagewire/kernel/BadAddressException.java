package io.pagewire.kernel;

/** An address range that is not allocated in the address space it was used on (the kernel's EFAULT). */
public final class BadAddressException extends KernelException {
    private static final long serialVersionUID = 1L;

    public BadAddressException(String message) {
        super(message);
    }
}
