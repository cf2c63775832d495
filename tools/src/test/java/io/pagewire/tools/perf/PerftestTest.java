package io.pagewire.tools.perf;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Pagewire;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.tools.testbed.HeldResources;
import java.io.StringWriter;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What perftest's users rely on: a latency test has exactly one ping in flight. */
class PerftestTest {
    /** An embedded pair of nodes, an application connected to each, and a perftest between them; closed in reverse order. */
    private record EmbeddedPerftest(EmbeddedCluster cluster, Perftest perftest, HeldResources held) implements AutoCloseable {
        static EmbeddedPerftest start(RegistrationMode mode, boolean busyPoll) {
            HeldResources held = new HeldResources();
            try {
                EmbeddedCluster cluster = held.add(EmbeddedCluster.start(2, Transport.NETTY, c -> { }));
                Pagewire a = held.add(Pagewire.connect(cluster.node(1).target(), cluster.connectOptions()));
                Pagewire b = held.add(Pagewire.connect(cluster.node(2).target(), cluster.connectOptions()));
                return new EmbeddedPerftest(cluster, held.add(new Perftest(a, b, mode, busyPoll)), held);
            } catch (RuntimeException e) {
                held.close(); // what was opened before the failure
                throw e;
            }
        }

        PagewireNode node(int n) {
            return cluster.node(n);
        }

        @Override
        public void close() {
            held.close();
        }
    }

    /** Both ways of seeing arrivals: watching memory (the default here, on the nodes' host) and notifications. */
    @Test
    void writeLatencyHasOnePingInFlightAndOnePongPerPing() throws Exception {
        for (Perftest.Arrival arrival : Perftest.Arrival.values()) {
            for (boolean busyPoll : new boolean[] {false, true}) {
                try (EmbeddedPerftest pair = EmbeddedPerftest.start(RegistrationMode.PINNED, busyPoll)) {
                    Perftest perftest = pair.perftest();
                    assertThat(perftest.arrival()).as("the default on the nodes' host").isEqualTo(Perftest.Arrival.MEMORY);
                    perftest.arrival(arrival);
                    Perftest.LatencyRow row = perftest.latency(Perftest.Test.WRITE_LAT, 64, 300, 30, done -> { });
                    assertThat(row.iterations()).isEqualTo(300);
                    // Installing a handler shows it the counter's current value; that is not a ping.
                    String how = arrival + ", busy-poll " + busyPoll;
                    assertThat(perftest.lastPingPong.pings()).as("pings answered, " + how).isEqualTo(330);
                    assertThat(perftest.lastPingPong.pongs()).as("pongs seen, " + how).isEqualTo(330);
                }
            }
        }
    }

    /** A ping of 2 bytes (ib_write_lat's default size) is seen in the low bytes of the word that holds the message's last byte. */
    @Test
    void writeLatencyWatchingMemoryTakesMessagesShorterThanAWord() throws Exception {
        try (EmbeddedPerftest pair = EmbeddedPerftest.start(RegistrationMode.PINNED, false)) {
            Perftest perftest = pair.perftest();
            assertThat(perftest.latency(Perftest.Test.WRITE_LAT, 2, 300, 0, done -> { }).iterations()).isEqualTo(300);
            assertThat(perftest.lastPingPong.pongs()).isEqualTo(300);
        }
    }

    /**
     * --samples: every measured round trip, in order, with its start; the table's figures are those
     * of the same round trips (a ping-pong's typical is half its median round trip, as perftest prints
     * it, a READ's is the whole request).
     */
    @Test
    void latencySamplesAreTheRoundTripsTheTableSummarises() throws Exception {
        try (EmbeddedPerftest pair = EmbeddedPerftest.start(RegistrationMode.PINNED, false)) {
            Perftest perftest = pair.perftest();
            for (Perftest.Test test : new Perftest.Test[] {Perftest.Test.WRITE_LAT, Perftest.Test.READ_LAT}) {
                LatencySamples samples = new LatencySamples();
                perftest.recordSamples(samples);
                Perftest.LatencyRow row = perftest.latency(test, 64, 201, 20, done -> { });
                StringWriter csv = new StringWriter();
                samples.writeCsv(csv);
                List<String> lines = csv.toString().lines().toList();
                assertThat(lines).as(test + " samples").hasSize(202).first().isEqualTo(LatencySamples.HEADER);
                long previousStart = Long.MIN_VALUE;
                long[] elapsed = new long[201];
                for (int i = 0; i < 201; i++) {
                    String[] fields = lines.get(i + 1).split(",");
                    assertThat(fields[0]).isEqualTo("64");
                    long start = Long.parseLong(fields[1]);
                    elapsed[i] = Long.parseLong(fields[2]);
                    assertThat(start).as("round trip %d starts after the one before ends", i).isGreaterThan(previousStart);
                    assertThat(elapsed[i]).isPositive();
                    previousStart = start + elapsed[i];
                }
                Arrays.sort(elapsed);
                double medianUs = elapsed[100] / 1000.0 / (test.pingPong() ? 2 : 1);
                assertThat(row.typical()).as(test + " typical against the samples' median").isCloseTo(medianUs, org.assertj.core.data.Percentage.withPercentage(1));
                assertThat(row.max()).isCloseTo(elapsed[200] / 1000.0 / (test.pingPong() ? 2 : 1), org.assertj.core.data.Percentage.withPercentage(1));
            }
        }
    }

    /**
     * Bandwidth keeps its requests in flight from their completions: every request counted was done
     * by the NIC, whatever the list size, the signalling interval and the queue pairs, and a run that
     * ends by time ends on every queue pair (requests after a queue pair's last signalled one are
     * retired too: before, a run of several queue pairs by time waited for ever).
     */
    @Test
    void bandwidthCountsWhatTheNicCompletedAndEndsOnEveryQueuePair() throws Exception {
        try (EmbeddedPerftest pair = EmbeddedPerftest.start(RegistrationMode.PINNED, false)) {
            Perftest perftest = pair.perftest();
            perftest.postList(4);
            perftest.cqMod(7);
            Perftest.BandwidthRow counted = perftest.bandwidth(Perftest.Test.WRITE_BW, 4096, 3001, 0, 0, 3, 10, done -> { });
            assertThat(counted.iterations()).isEqualTo(3001);
            long writes = pair.node(1).nic().counters().get(NicCounter.WRITES_COMPLETED);
            assertThat(writes).as("writes the NIC completed").isEqualTo(3001);

            perftest.postList(16);
            perftest.cqMod(100);
            Perftest.BandwidthRow timed = perftest.bandwidth(Perftest.Test.WRITE_BW, 65536, Long.MAX_VALUE, 500_000_000L, 0, 3, 128,
                    done -> { });
            assertThat(timed.iterations()).isPositive();
            assertThat(pair.node(1).nic().counters().get(NicCounter.WRITES_COMPLETED) - writes)
                    .as("every write counted was completed, none left in flight").isEqualTo(timed.iterations());
        }
    }

    /**
     * The bench's per-mode figures come from one ping-pong whose pings take turns between variants:
     * each row has its own pings, one in flight at a time, and a fresh-page variant faults on every
     * ping at the far side.
     */
    @Test
    void interleavedWriteLatencyGivesEachVariantItsOwnPings() throws Exception {
        try (EmbeddedPerftest pair = EmbeddedPerftest.start(RegistrationMode.PINNED, false)) {
            Perftest perftest = pair.perftest();
            List<Perftest.Variant> variants = List.of(new Perftest.Variant(RegistrationMode.PINNED, false),
                    new Perftest.Variant(RegistrationMode.ON_DEMAND, false), new Perftest.Variant(RegistrationMode.PIN_ON_MISS, true));
            long faultsBefore = pair.node(2).nic().counters().get(NicCounter.RECEIVE_FAULTS_MINOR);
            List<Perftest.LatencyRow> rows = perftest.interleavedWriteLatency(variants, 64, 200, 20);
            assertThat(rows).hasSize(3).allSatisfy(r -> assertThat(r.iterations()).isEqualTo(200));
            assertThat(perftest.lastPingPong.pings()).as("pings answered").isEqualTo(3 * 220);
            assertThat(perftest.lastPingPong.pongs()).as("pongs seen").isEqualTo(3 * 220);
            assertThat(pair.node(2).nic().counters().get(NicCounter.RECEIVE_FAULTS_MINOR) - faultsBefore)
                    .as("a receive fault on every ping to a fresh page").isGreaterThanOrEqualTo(220);
        }
    }

    @Test
    void sendAndAtomicTestsRunLikePerftests() throws Exception {
        try (EmbeddedPerftest pair = EmbeddedPerftest.start(RegistrationMode.ON_DEMAND, false)) {
            Perftest perftest = pair.perftest();
            Perftest.LatencyRow sendLat = perftest.latency(Perftest.Test.SEND_LAT, 64, 200, 20, done -> { });
            assertThat(sendLat.iterations()).isEqualTo(200);
            assertThat(perftest.lastSendPings).as("the far side answered each ping once: one in flight at a time").isEqualTo(220);

            Perftest.BandwidthRow sendBw = perftest.bandwidth(Perftest.Test.SEND_BW, 4096, 3000, 0, 0, 1, 64, done -> { });
            assertThat(sendBw.iterations()).isEqualTo(3000);
            assertThat(sendBw.averageMbPerSec()).isPositive();
            assertThat(pair.node(2).nic().counters().get(NicCounter.RECEIVES_COMPLETED))
                    .as("every SEND filled a posted receive").isGreaterThanOrEqualTo(3000 + 220);

            Perftest.BandwidthRow atomicBw = perftest.bandwidth(Perftest.Test.ATOMIC_BW, 8, 2000, 0, 0, 1, 32, done -> { });
            assertThat(atomicBw.iterations()).isEqualTo(2000);
            Perftest.LatencyRow atomicLat = perftest.latency(Perftest.Test.ATOMIC_LAT, 8, 100, 10, done -> { });
            assertThat(atomicLat.iterations()).isEqualTo(100);
            assertThat(pair.node(1).nic().counters().get(NicCounter.ATOMICS_COMPLETED)).isEqualTo(2110);
        }
    }
}
