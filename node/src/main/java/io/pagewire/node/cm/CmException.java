package io.pagewire.node.cm;

/** A connection-manager call that cannot be done, with the errno-like reason librdmacm would return. */
public final class CmException extends RuntimeException {
    /** Why, as librdmacm's callers see it (EINVAL, ENOENT, EADDRINUSE, EADDRNOTAVAIL, ...). */
    public enum Code {
        INVALID(22), NOT_FOUND(2), ADDRESS_IN_USE(98), ADDRESS_NOT_AVAILABLE(99), UNAVAILABLE(19);

        private final int errno;

        Code(int errno) {
            this.errno = errno;
        }

        /** Linux's errno for it. */
        public int errno() {
            return errno;
        }
    }

    private final Code code;

    public CmException(Code code, String message) {
        super(message);
        this.code = code;
    }

    public Code code() {
        return code;
    }
}
