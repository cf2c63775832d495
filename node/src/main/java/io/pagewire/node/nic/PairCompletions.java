package io.pagewire.node.nic;

import io.pagewire.kernel.NanoClock;
import java.util.function.Consumer;

/**
 * Where a queue pair's work ends: each request's and receive's completion counted, timed where an
 * application sees it, and pushed to the pair's completion queue in the order the halves finish them.
 * A completion queue that overflows is the pair's failure, as a CQ overrun is an RC queue pair's.
 */
final class PairCompletions {
    private final NicCounters counters;
    private final NicObservers observers;
    private final NanoClock clock;
    private final CompletionQueue cq;
    private final int qpn;
    /** Told, with the reason, when a completion found the completion queue full. */
    private final Consumer<String> overflowed;

    PairCompletions(NicCounters counters, NicObservers observers, NanoClock clock, CompletionQueue cq, int qpn, Consumer<String> overflowed) {
        this.counters = counters;
        this.observers = observers;
        this.clock = clock;
        this.cq = cq;
        this.qpn = qpn;
        this.overflowed = overflowed;
    }

    /** A send queue entry's outcome; its latency is recorded for what the application sees (signalled, or failed). */
    void complete(SendWqe wqe, CompletionStatus status, String error) {
        complete(wqe.wr, status, error, wqe.atomicResult);
        if (wqe.wr.signaled() || status != CompletionStatus.SUCCESS) {
            // Latency is told for the completions an application sees (a CQE), as a NIC reports them: a
            // histogram record per unsignalled request cost a tenth of a sending node's loop at 0.5 Mpps.
            MemoryRegion first = wqe.firstRegion();
            observers.completed(wqe.wr.opcode(), first == null ? null : first.mode(), status, wqe.wr.length(),
                    clock.nanoTime() - wqe.postedNs);
        }
    }

    /** A request's outcome, {@code value} the atomic's original value; a successful unsignalled one is only counted. */
    void complete(WorkRequest wr, CompletionStatus status, String error, long value) {
        counters.countCompletion(status);
        if (status == CompletionStatus.SUCCESS) {
            NicCounter kind = switch (wr.opcode()) {
                case WRITE, WRITE_WITH_NOTIFY, WRITE_WITH_IMM -> NicCounter.WRITES_COMPLETED;
                case READ -> NicCounter.READS_COMPLETED;
                case FETCH_ADD, COMPARE_SWAP -> NicCounter.ATOMICS_COMPLETED;
                case SEND, SEND_WITH_IMM, SEND_WITH_INVALIDATE -> NicCounter.SENDS_COMPLETED;
                case RECV, RECV_RDMA_WITH_IMM -> NicCounter.RECEIVES_COMPLETED;
                case BIND_WINDOW, LOCAL_INVALIDATE -> null; // no traffic: the operation stays on this node
            };
            if (kind != null) {
                counters.increment(kind);
            }
            if (!wr.signaled()) {
                return;
            }
        }
        long bytes = status == CompletionStatus.SUCCESS ? wr.length() : 0;
        push(new Completion(wr.wrId(), qpn, wr.opcode(), status, bytes, value, error));
    }

    /** A posted receive's outcome. */
    void completeReceive(ReceiveRequest request, Completion.Opcode opcode, CompletionStatus status, long bytes, String error,
            boolean hasImmediate, int immediate, boolean solicited) {
        completeReceive(request, opcode, status, bytes, error, hasImmediate, immediate, solicited, false);
    }

    /** As above, for a receive whose SEND invalidated the window {@code immediate} names when {@code invalidated}. */
    void completeReceive(ReceiveRequest request, Completion.Opcode opcode, CompletionStatus status, long bytes, String error,
            boolean hasImmediate, int immediate, boolean solicited, boolean invalidated) {
        completeReceive(request, opcode, status, bytes, error, hasImmediate, immediate, solicited, invalidated, null);
    }

    /** As above, for a UD receive from {@code source}. */
    void completeReceive(ReceiveRequest request, Completion.Opcode opcode, CompletionStatus status, long bytes, String error,
            boolean hasImmediate, int immediate, boolean solicited, boolean invalidated, Datagram source) {
        counters.countCompletion(status);
        if (status == CompletionStatus.SUCCESS) {
            counters.increment(NicCounter.RECEIVES_COMPLETED);
        }
        push(new Completion(request.wrId(), qpn, opcode, status, status == CompletionStatus.SUCCESS ? bytes : 0, 0, error, hasImmediate,
                immediate, solicited, invalidated, source));
    }

    private void push(Completion completion) {
        if (!cq.push(completion)) {
            overflowed.accept("completion queue " + cq.id() + " overflowed (capacity pagewire.nic.cqCapacity)");
        }
    }
}
