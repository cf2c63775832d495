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
                    Pagewire a = Pagewire.connect(pair.node(1).target());
                    Pagewire b = Pagewire.connect(pair.node(2).target());
                    Perftest perftest = new Perftest(a, b, RegistrationMode.PINNED, busyPoll)) {
                Perftest.LatencyRow row = perftest.latency(Perftest.Test.WRITE_LAT, 64, 300, 30, done -> { });
                assertThat(row.iterations()).isEqualTo(300);
                // Installing a handler shows it the counter's current value; that is not a ping.
                assertThat(perftest.lastPingPong.pings()).as("pings answered, busy-poll " + busyPoll).isEqualTo(330);
                assertThat(perftest.lastPingPong.pongs()).as("pongs seen, busy-poll " + busyPoll).isEqualTo(330);
            }
        }
    }
}
