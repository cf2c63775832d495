package io.pagewire.tools.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Pagewire;
import io.pagewire.kernel.FaultKind;
import io.pagewire.node.metrics.Metric;
import io.pagewire.node.nic.FaultAnswer;
import io.pagewire.node.Transport;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * What an experiment against a running cluster reads through the SDK: the settings only a node's
 * configuration sets (its memory pressure and depth, fault answer, loss and swap device) and a
 * timer's count and total (the experiments' counted events are asserted where they run).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NodeStatsTest {
    @Test
    void aNodesConfigurationAndCountsReadAsItsMetersSayThem() {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.security().plaintext();
            c.kernel().physicalMemoryBytes(16L << 20).swapBytes(16L << 20).swapReadLatencyNs(123_000);
            c.nic().reclaimAfterAccess(1.0).reclaimDepth(FaultKind.MAJOR).faultAnswer(FaultAnswer.DROP);
            c.fabric().lossRate(0.01);
        }); ApplicationPair pair = ApplicationPair.over(cluster)) {
            NodeStats stats = NodeStats.read(pair.responder());
            String pressure = Metric.MEMORY_PRESSURE.meter().prometheusName();
            assertThat(stats.sum(pressure, "depth=major")).isEqualTo(1.0);
            assertThat(stats.sum(pressure, "depth=minor")).isZero();
            assertThat(stats.sum(Metric.FAULT_ANSWER.meter().prometheusName(), "answer=drop")).isEqualTo(1.0);
            assertThat(stats.sum(Metric.FAULT_ANSWER.meter().prometheusName(), "answer=rnr_nak")).isZero();
            assertThat(stats.sum(Metric.INJECTED_LOSS.meter().prometheusName())).isEqualTo(0.01);
            assertThat(stats.sum(Metric.SWAP_READ_LATENCY.meter().prometheusName())).isEqualTo(123e-6);

            NodeStats.Timed service = stats.timer(Metric.FAULT_SERVICE_TIME.meter());
            assertThat(service.count()).isZero();
            assertThat(stats.stats()).extracting(Pagewire.Stat::name).contains(Metric.FAULT_SERVICE_TIME.meter().prometheusName() + "_sum");
        }
    }
}
