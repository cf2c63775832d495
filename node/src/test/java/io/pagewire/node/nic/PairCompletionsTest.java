package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * A queue pair's completions without a NIC: what reaches the completion queue (in order, unsignalled
 * successes only counted), what the counters and the latency observer see, and a full queue told as
 * the pair's failure.
 */
class PairCompletionsTest {
    private static final int QPN = 7;
    private final NicCounters counters = new NicCounters();
    private final NicObservers observers = new NicObservers(counters);
    private final AtomicLong now = new AtomicLong(1_000);
    private final List<String> overflows = new ArrayList<>();
    private final List<String> latencies = new ArrayList<>();

    private PairCompletions completionsInto(CompletionQueue cq) {
        observers.observeCompletions((opcode, mode, status, bytes, latencyNs) -> latencies.add(opcode + " " + status + " " + latencyNs));
        return new PairCompletions(counters, observers, now::get, cq, QPN, overflows::add);
    }

    @Test
    void signalledRequestsAndReceivesReachTheQueueInOrderAndUnsignalledSuccessesAreOnlyCounted() {
        CompletionQueue cq = new CompletionQueue(3, 16);
        PairCompletions completions = completionsInto(cq);
        completions.complete(WorkRequest.write(1, 1, 0, 4096, 0, 2), CompletionStatus.SUCCESS, null, 0);
        completions.complete(WorkRequest.write(2, 1, 0, 4096, 0, 2).unsignaled(), CompletionStatus.SUCCESS, null, 0);
        completions.completeReceive(new ReceiveRequest(3, 1, 0, 512), Completion.Opcode.RECV, CompletionStatus.SUCCESS, 100, null, true, 42,
                false);
        completions.complete(WorkRequest.send(4, 1, 0, 64).unsignaled(), CompletionStatus.FLUSHED, "flushed: closed", 0);

        Completion write = cq.poll();
        assertThat(write.wrId()).isEqualTo(1);
        assertThat(write.qpn()).isEqualTo(QPN);
        assertThat(write.bytes()).isEqualTo(4096);
        Completion receive = cq.poll();
        assertThat(receive.wrId()).isEqualTo(3);
        assertThat(receive.bytes()).isEqualTo(100);
        assertThat(receive.immediate()).isEqualTo(42);
        Completion flushed = cq.poll();
        assertThat(flushed.wrId()).as("a failed unsignalled request still completes").isEqualTo(4);
        assertThat(flushed.status()).isEqualTo(CompletionStatus.FLUSHED);
        assertThat(flushed.bytes()).as("a failed request moved nothing").isZero();
        assertThat(cq.poll()).isNull();

        assertThat(counters.get(NicCounter.WRITES_COMPLETED)).isEqualTo(2);
        assertThat(counters.get(NicCounter.RECEIVES_COMPLETED)).isEqualTo(1);
        assertThat(counters.get(NicCounter.SENDS_COMPLETED)).isZero();
        assertThat(overflows).isEmpty();
    }

    @Test
    void latencyIsToldForWhatTheApplicationSees() {
        PairCompletions completions = completionsInto(new CompletionQueue(3, 16));
        WorkRequest signalled = WorkRequest.write(1, 1, 0, 4096, 0, 2);
        completions.complete(new SendWqe(signalled, new MemoryRegion[0], 0, 1, 400), CompletionStatus.SUCCESS, null);
        completions.complete(new SendWqe(signalled.unsignaled(), new MemoryRegion[0], 1, 1, 500), CompletionStatus.SUCCESS, null);
        completions.complete(new SendWqe(signalled.unsignaled(), new MemoryRegion[0], 2, 1, 900), CompletionStatus.REMOTE_ACCESS_ERROR, "x");

        assertThat(latencies).containsExactly("WRITE SUCCESS 600", "WRITE REMOTE_ACCESS_ERROR 100");
    }

    @Test
    void aFullQueueIsToldAsTheFailureWithTheCompletionQueueNamed() {
        CompletionQueue cq = new CompletionQueue(9, 2);
        PairCompletions completions = completionsInto(cq);
        for (int i = 1; i <= 3; i++) {
            completions.complete(WorkRequest.send(i, 1, 0, 64), CompletionStatus.SUCCESS, null, 0);
        }
        assertThat(cq.size()).isEqualTo(2);
        assertThat(overflows).containsExactly("completion queue 9 overflowed (capacity pagewire.nic.cqCapacity)");
    }
}
