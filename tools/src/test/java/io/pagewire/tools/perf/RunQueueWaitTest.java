package io.pagewire.tools.perf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.Test;

class RunQueueWaitTest {
    @Test
    void aThreadsTimeOnACoreIsCountedBetweenTwoSnapshots() throws Exception {
        assumeTrue(RunQueueWait.available(), "this kernel keeps no schedstat");
        List<Long> self = List.of(ProcessHandle.current().pid());
        CountDownLatch measured = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        CountDownLatch snapshotAfter = new CountDownLatch(1);
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        Thread burner = new Thread(() -> {
            try {
                measured.await();
                // 20 ms of this thread's own CPU time, however long a loaded machine keeps it off a core.
                long start = threads.getCurrentThreadCpuTime();
                long x = 0;
                while (threads.getCurrentThreadCpuTime() - start < 20_000_000L) {
                    x += Long.numberOfTrailingZeros(x + start);
                }
                if (x == 42) {
                    System.out.println(x);
                }
                done.countDown();
                // Alive until the second snapshot: a thread that has ended is missing from it, with its time.
                snapshotAfter.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "rq-burner-7");
        burner.start();
        RunQueueWait before = RunQueueWait.snapshot(self);
        measured.countDown();
        done.await();
        RunQueueWait delta = RunQueueWait.snapshot(self).since(before);
        snapshotAfter.countDown();
        burner.join();

        assertThat(delta.total().runNs()).as("the burner's 20 ms on a core, among this process's threads").isGreaterThan(10_000_000L);
        assertThat(delta.total().waitNs()).isNotNegative();
        assertThat(delta.perMessage(1000)).matches("\\d+\\.\\d us waiting for a core and \\d+\\.\\d us on one per message");
    }

    @Test
    void processesThatAreGoneGiveAnEmptySnapshot() {
        RunQueueWait none = RunQueueWait.snapshot(List.of(Long.MAX_VALUE));
        assertThat(none.byThread()).isEmpty();
        assertThat(none.total()).isEqualTo(new RunQueueWait.Times(0, 0));
    }
}
