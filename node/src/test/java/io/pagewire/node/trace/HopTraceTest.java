package io.pagewire.node.trace;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The process's hop trace: what is marked while armed lands in the file, in the format the breakdown reads, and nothing else does. */
class HopTraceTest {
    @Test
    void marksWhileArmedAreWrittenWithTheirMomentAndThread(@TempDir Path dir) throws Exception {
        HopTrace.mark(HopTrace.Hop.POST_READ); // unarmed: nowhere
        Path file = dir.resolve("sub/node-1.hops");
        long before = System.nanoTime();
        try (HopTrace.Armed armed = HopTrace.arm(file, "node node-1, pid 1", 100)) {
            assertThat(armed).isNotNull();
            assertThat(HopTrace.arm(dir.resolve("other.hops"), "node node-2, pid 1", 10)).as("one trace per process").isNull();
            HopTrace.mark(HopTrace.Hop.POST_READ);
            Thread other = new Thread(() -> HopTrace.mark(HopTrace.Hop.LANE_SEND_REQUEST), "the other thread");
            other.start();
            other.join();
            HopTrace.mark(null);
        }
        HopTrace.mark(HopTrace.Hop.BELL_RUNG); // disarmed again

        List<String> all = Files.readAllLines(file);
        assertThat(all.get(0)).isEqualTo("# pagewire hop trace: node node-1, pid 1; 2 events kept of 2");
        // What the threads that marked allocated since: this one is alive and says it; the other ended before the file.
        assertThat(all).filteredOn(l -> l.startsWith("# thread ")).singleElement().asString()
                .matches("# thread " + Thread.currentThread().getName().replace(' ', '_') + " allocated \\d+ bytes since its first mark");
        List<String> lines = all.stream().filter(l -> !l.startsWith("# thread ")).toList();
        assertThat(lines.subList(2, lines.size())).hasSize(2);
        String[] first = lines.get(2).split(" ");
        assertThat(Long.parseLong(first[0])).isBetween(before, System.nanoTime());
        assertThat(first[1]).isEqualTo("POST_READ");
        assertThat(first[2]).isEqualTo(Thread.currentThread().getName().replace(' ', '_'));
        assertThat(lines.get(3)).endsWith(" LANE_SEND_REQUEST the_other_thread");
        assertThat(HopTrace.isArmed()).isFalse();
    }

    @Test
    void aFullTraceCountsWhatItCouldNotKeep(@TempDir Path dir) throws IOException {
        Path file = dir.resolve("n.hops");
        try (HopTrace.Armed armed = HopTrace.arm(file, "node n, pid 1", 3)) {
            for (int i = 0; i < 5; i++) {
                HopTrace.mark(HopTrace.Hop.COMPLETION_WRITTEN);
            }
        }
        List<String> lines = Files.readAllLines(file);
        assertThat(lines.get(0)).endsWith("3 events kept of 5");
        assertThat(lines).hasSize(2 + 1 + 3); // the header, this thread's allocation, the column line, three events
    }
}
