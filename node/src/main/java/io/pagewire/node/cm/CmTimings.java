package io.pagewire.node.cm;

/**
 * The connection manager's clocks: how long a request waits for its answer before it is sent again,
 * how many times it is sent again, and how long a disconnected id stays in time-wait.
 */
public record CmTimings(long responseTimeoutMs, int retries, long timeWaitMs) {
    public CmTimings {
        if (responseTimeoutMs <= 0 || retries < 0 || timeWaitMs < 0) {
            throw new IllegalArgumentException("CM timings must be positive: " + responseTimeoutMs + " ms, " + retries + " retries, " + timeWaitMs + " ms");
        }
    }
}
