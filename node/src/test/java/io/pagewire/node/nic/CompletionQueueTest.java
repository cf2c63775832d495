package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** A completion queue is bounded by its capacity without allocating it: every session has one, most barely used. */
class CompletionQueueTest {
    @Test
    void anIdleQueueCostsAlmostNothingAndTheBoundStillHolds() {
        long before = allocated();
        CompletionQueue[] queues = new CompletionQueue[100];
        for (int i = 0; i < queues.length; i++) {
            queues[i] = new CompletionQueue(i, 65_536);
        }
        long perQueue = (allocated() - before) / queues.length;
        assertThat(perQueue).as("bytes per idle 65,536-slot queue (an array of that many slots is 256 KiB)").isLessThan(4096);

        CompletionQueue small = new CompletionQueue(0, 2);
        Completion c = new Completion(1, 1, Completion.Opcode.WRITE, CompletionStatus.SUCCESS, 8, 0, null);
        assertThat(small.push(c)).isTrue();
        assertThat(small.push(c)).isTrue();
        assertThat(small.push(c)).as("full at its capacity").isFalse();
        assertThat(small.poll()).isSameAs(c);
    }

    @Test
    void aHandlerThatThrowsDoesNotStopTheCompletionsAfterIt() {
        CompletionQueue cq = new CompletionQueue(0, 16);
        List<Long> seen = new ArrayList<>();
        cq.setHandler(new CompletionQueue.Handler() {
            @Override
            public void completed(Completion completion) {
                if (completion.wrId() == 1) {
                    throw new IllegalStateException("a broken handler");
                }
                seen.add(completion.wrId());
            }

            @Override
            public void flush() {
                throw new IllegalStateException("a broken flush");
            }
        });
        for (long wr = 1; wr <= 3; wr++) {
            assertThat(cq.push(new Completion(wr, 1, Completion.Opcode.WRITE, CompletionStatus.SUCCESS, 8, 0, null))).isTrue();
        }
        cq.flush();
        assertThat(seen).containsExactly(2L, 3L);
    }

    private static long allocated() {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        return threads.getThreadAllocatedBytes(Thread.currentThread().getId());
    }
}
