package io.pagewire.node.nic;

import io.pagewire.kernel.FaultKind;

/**
 * Where a NIC's parts report what they saw: the service time of each page fault, the length of each
 * wait (stall, parking, RNR back-off, credits, pacing) and the latency of each finished work request,
 * to whichever observers the metrics layer set (none at first), and the fault counters.
 */
final class NicObservers {
    private final NicCounters counters;
    private volatile CompletionObserver completionObserver = (opcode, mode, status, bytes, latencyNs) -> { };
    private volatile FaultObserver faultObserver = (side, kind, mode, serviceNs) -> { };
    private volatile WaitObserver waitObserver = (cause, nanos) -> { };

    NicObservers(NicCounters counters) {
        this.counters = counters;
    }

    void observeFaults(FaultObserver observer) {
        faultObserver = observer;
    }

    void observeWaits(WaitObserver observer) {
        waitObserver = observer;
    }

    void observeCompletions(CompletionObserver observer) {
        completionObserver = observer;
    }

    /** One of the NIC's waits ended after {@code nanos}. */
    void waited(WaitCause cause, long nanos) {
        waitObserver.waited(cause, nanos);
    }

    void completed(Completion.Opcode opcode, RegistrationMode mode, CompletionStatus status, long bytes, long latencyNs) {
        completionObserver.completed(opcode, mode, status, bytes, latencyNs);
    }

    /** Counts a served fault by the side it was on and tells the fault observer how long it took. */
    void faultServed(MemoryRegion region, Side side, FaultKind kind, long serviceNs) {
        RegistrationMode mode = region.mode();
        boolean major = kind == FaultKind.MAJOR;
        region.counters().fault(major);
        NicCounter counter = switch (side) {
            case SEND, READ_SOURCE -> major ? NicCounter.SEND_FAULTS_MAJOR : NicCounter.SEND_FAULTS_MINOR;
            case RECEIVE, READ_TARGET, ATOMIC_TARGET -> major ? NicCounter.RECEIVE_FAULTS_MAJOR : NicCounter.RECEIVE_FAULTS_MINOR;
            case RECEIVE_BUFFER -> major ? NicCounter.RECEIVE_BUFFER_FAULTS_MAJOR : NicCounter.RECEIVE_BUFFER_FAULTS_MINOR;
            case PREFETCH -> major ? NicCounter.PREFETCH_FAULTS_MAJOR : NicCounter.PREFETCH_FAULTS_MINOR;
        };
        counters.increment(counter, mode);
        faultObserver.served(side, kind, mode, serviceNs);
    }
}
