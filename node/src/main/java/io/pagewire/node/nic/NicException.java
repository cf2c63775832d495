package io.pagewire.node.nic;

/** A request the NIC refuses at once (bad key, range, state or configuration); the message says what to fix. */
public class NicException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public NicException(String message) {
        super(message);
    }
}
