package io.pagewire.client;

import java.time.Duration;

/**
 * How the SDK talks to a node: the deadline of each call, whether waits for completions spin
 * (busy-poll, for latency runs, like perftest's completion polling) instead of sleeping, whether
 * a co-located node's shared-memory rings are used, and how the connection is secured.
 */
public record ConnectOptions(Duration deadline, boolean busyPoll, boolean sharedMemory, ClientSecurity security) {
    public ConnectOptions {
        security = security == null ? ClientSecurity.plaintext() : security;
    }

    /** Options with shared-memory rings asked for (used when the node is on this host), secured as the environment says. */
    public ConnectOptions(Duration deadline, boolean busyPoll) {
        this(deadline, busyPoll, true, ClientSecurity.fromEnvironment(System.getenv()));
    }

    /** Two-minute deadlines, blocking waits, shared memory where offered, security from the environment ({@link ClientSecurity#fromEnvironment}). */
    public static ConnectOptions defaults() {
        return new ConnectOptions(Duration.ofMinutes(2), false, true, ClientSecurity.fromEnvironment(System.getenv()));
    }

    public ConnectOptions withDeadline(Duration value) {
        return new ConnectOptions(value, busyPoll, sharedMemory, security);
    }

    public ConnectOptions withBusyPoll(boolean value) {
        return new ConnectOptions(deadline, value, sharedMemory, security);
    }

    /** Mutual TLS, a token, or plaintext: see {@link ClientSecurity}. */
    public ConnectOptions withSecurity(ClientSecurity value) {
        return new ConnectOptions(deadline, busyPoll, sharedMemory, value);
    }

    /**
     * Whether endpoints ask their node for shared-memory rings (user-level access: posts and
     * completions without a call each). They get them only when the node offers them and this
     * process can map the node's file, that is on the node's host or a shared directory; otherwise,
     * or with false, everything travels on the gRPC session stream.
     */
    public ConnectOptions withSharedMemory(boolean value) {
        return new ConnectOptions(deadline, busyPoll, value, security);
    }
}
