package io.pagewire.client;

import java.time.Duration;

/**
 * How the SDK talks to a node: the deadline of each call, and whether waits for completions spin
 * (busy-poll, for latency runs, like perftest's completion polling) instead of sleeping.
 */
public record ConnectOptions(Duration deadline, boolean busyPoll) {
    public static ConnectOptions defaults() {
        return new ConnectOptions(Duration.ofMinutes(2), false);
    }

    public ConnectOptions withDeadline(Duration value) {
        return new ConnectOptions(value, busyPoll);
    }

    public ConnectOptions withBusyPoll(boolean value) {
        return new ConnectOptions(deadline, value);
    }
}
