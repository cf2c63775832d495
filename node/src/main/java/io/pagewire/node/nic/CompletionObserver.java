package io.pagewire.node.nic;

/** Told of every finished work request and how long it took from post to completion: how metrics see latency. */
@FunctionalInterface
public interface CompletionObserver {
    /**
     * @param mode the registration mode of the request's local region, or null (FETCH_ADD has none)
     */
    void completed(Completion.Opcode opcode, RegistrationMode mode, CompletionStatus status, long bytes, long latencyNs);
}
