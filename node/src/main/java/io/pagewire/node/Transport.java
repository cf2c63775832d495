package io.pagewire.node;

import java.util.Arrays;
import java.util.Locale;

/** How a node's gRPC server and channels carry traffic. */
public enum Transport {
    /** HTTP/2 over TCP (Netty): what nodes in containers use, and loopback clusters in one JVM. */
    NETTY,
    /** gRPC's in-process transport: nodes in one JVM without sockets, for tests. */
    IN_PROCESS;

    public static Transport parse(String value) {
        try {
            return valueOf(value.trim().toUpperCase(Locale.ROOT).replace('-', '_'));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("pagewire.node.transport must be one of " + Arrays.toString(values()) + ", was '" + value + "'");
        }
    }
}
