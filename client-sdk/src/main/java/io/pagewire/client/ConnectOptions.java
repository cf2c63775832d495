package io.pagewire.client;

import java.time.Duration;

/**
 * How the SDK talks to a node: the deadline of each call, whether waits for completions spin
 * (busy-poll, for latency runs, like perftest's completion polling) instead of sleeping, whether
 * a co-located node's shared-memory rings are used (and how long their sleeping agent goes without a
 * look when no doorbell wakes it), and how the connection is secured.
 */
public record ConnectOptions(Duration deadline, boolean busyPoll, boolean sharedMemory, ClientSecurity security, Duration ringSleepLimit) {
    /** How long a sleeping ring agent goes without a look at its rings by default (a lost doorbell costs no more). */
    public static final Duration RING_SLEEP_LIMIT_DEFAULT = Duration.ofMillis(50);

    public ConnectOptions {
        security = security == null ? ClientSecurity.plaintext() : security;
        ringSleepLimit = ringSleepLimit == null ? RING_SLEEP_LIMIT_DEFAULT : ringSleepLimit;
    }

    public ConnectOptions(Duration deadline, boolean busyPoll, boolean sharedMemory, ClientSecurity security) {
        this(deadline, busyPoll, sharedMemory, security, RING_SLEEP_LIMIT_DEFAULT);
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
        return new ConnectOptions(value, busyPoll, sharedMemory, security, ringSleepLimit);
    }

    public ConnectOptions withBusyPoll(boolean value) {
        return new ConnectOptions(deadline, value, sharedMemory, security, ringSleepLimit);
    }

    /** Mutual TLS, a token, or plaintext: see {@link ClientSecurity}. */
    public ConnectOptions withSecurity(ClientSecurity value) {
        return new ConnectOptions(deadline, busyPoll, sharedMemory, value, ringSleepLimit);
    }

    /**
     * Whether endpoints ask their node for shared-memory rings (user-level access: posts and
     * completions without a call each). They get them only when the node offers them and this
     * process can map the node's file, that is on the node's host or a shared directory; otherwise,
     * or with false, everything travels on the gRPC session stream.
     */
    public ConnectOptions withSharedMemory(boolean value) {
        return new ConnectOptions(deadline, busyPoll, value, security, ringSleepLimit);
    }

    /** How long the agent of shared-memory rings sleeps, when no doorbell wakes it, before it looks anyway (tests set hours). */
    public ConnectOptions withRingSleepLimit(Duration value) {
        return new ConnectOptions(deadline, busyPoll, sharedMemory, security, value);
    }
}
