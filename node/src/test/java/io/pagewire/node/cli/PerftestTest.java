package io.pagewire.node.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Pagewire;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.EmbeddedCluster;
import io.pagewire.node.Transport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** What perftest's users rely on: a latency test has exactly one ping in flight. */
class PerftestTest {
    @Test
    @Timeout(120)
    void writeLatencyHasOnePingInFlightAndOnePongPerPing() throws Exception {
        for (boolean busyPoll : new boolean[] {false, true}) {
            try (EmbeddedCluster pair = EmbeddedCluster.start(2, Transport.NETTY, c -> { });
                    Pagewire a = Pagewire.connect(pair.node(1).target(), pair.connectOptions());
                    Pagewire b = Pagewire.connect(pair.node(2).target(), pair.connectOptions());
                    Perftest perftest = new Perftest(a, b, RegistrationMode.PINNED, busyPoll)) {
                Perftest.LatencyRow row = perftest.latency(Perftest.Test.WRITE_LAT, 64, 300, 30, done -> { });
                assertThat(row.iterations()).isEqualTo(300);
                // Installing a handler shows it the counter's current value; that is not a ping.
                assertThat(perftest.lastPingPong.pings()).as("pings answered, busy-poll " + busyPoll).isEqualTo(330);
                assertThat(perftest.lastPingPong.pongs()).as("pongs seen, busy-poll " + busyPoll).isEqualTo(330);
            }
        }
    }

    @Test
    @Timeout(120)
    void sendAndAtomicTestsRunLikePerftests() throws Exception {
        try (EmbeddedCluster pair = EmbeddedCluster.start(2, Transport.NETTY, c -> { });
                Pagewire a = Pagewire.connect(pair.node(1).target(), pair.connectOptions());
                Pagewire b = Pagewire.connect(pair.node(2).target(), pair.connectOptions());
                Perftest perftest = new Perftest(a, b, RegistrationMode.ON_DEMAND, false)) {
            Perftest.LatencyRow sendLat = perftest.latency(Perftest.Test.SEND_LAT, 64, 200, 20, done -> { });
            assertThat(sendLat.iterations()).isEqualTo(200);
            assertThat(perftest.lastSendPings).as("the far side answered each ping once: one in flight at a time").isEqualTo(220);

            Perftest.BandwidthRow sendBw = perftest.bandwidth(Perftest.Test.SEND_BW, 4096, 3000, 0, 0, 1, 64, done -> { });
            assertThat(sendBw.iterations()).isEqualTo(3000);
            assertThat(sendBw.averageMbPerSec()).isPositive();
            assertThat(pair.node(2).nic().counters().get(io.pagewire.node.nic.NicCounter.RECEIVES_COMPLETED))
                    .as("every SEND filled a posted receive").isGreaterThanOrEqualTo(3000 + 220);

            Perftest.BandwidthRow atomicBw = perftest.bandwidth(Perftest.Test.ATOMIC_BW, 8, 2000, 0, 0, 1, 32, done -> { });
            assertThat(atomicBw.iterations()).isEqualTo(2000);
            Perftest.LatencyRow atomicLat = perftest.latency(Perftest.Test.ATOMIC_LAT, 8, 100, 10, done -> { });
            assertThat(atomicLat.iterations()).isEqualTo(100);
            assertThat(pair.node(1).nic().counters().get(io.pagewire.node.nic.NicCounter.ATOMICS_COMPLETED)).isEqualTo(2110);
        }
    }
}
