package io.pagewire.node.nic;

/** Told of every finished work request and how long it took from post to completion: how metrics see latency. */
@FunctionalInterface
public interface CompletionObserver {
    void completed(Completion.Opcode opcode, CompletionStatus status, long bytes, long latencyNs);
}
