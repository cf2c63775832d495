package io.pagewire.node.metrics;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.micrometer.core.instrument.Timer;
import io.micrometer.prometheus.PrometheusConfig;
import io.micrometer.prometheus.PrometheusMeterRegistry;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The quantiles `pagewire stat` and the demo print come from the same buckets that Prometheus reads. */
class TimerQuantilesTest {
    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);

    private Timer timer() {
        return Timer.builder("t").publishPercentileHistogram().minimumExpectedValue(Duration.ofNanos(10_000))
                .maximumExpectedValue(Duration.ofSeconds(30)).register(registry);
    }

    @Test
    void quantilesFollowTheRecordedValuesWithinABucket() {
        Timer timer = timer();
        for (int us = 1; us <= 1000; us++) {
            timer.record(us, TimeUnit.MICROSECONDS);
        }
        double p50 = NodeMetrics.quantileSeconds(timer.takeSnapshot().histogramCounts(), 0.5);
        double p99 = NodeMetrics.quantileSeconds(timer.takeSnapshot().histogramCounts(), 0.99);
        assertThat(p50).isCloseTo(500e-6, within(125e-6));
        assertThat(p99).isCloseTo(990e-6, within(250e-6));
        assertThat(p99).isGreaterThan(p50);
    }

    @Test
    void aTimerWithNothingRecordedReadsZero() {
        assertThat(NodeMetrics.quantileSeconds(timer().takeSnapshot().histogramCounts(), 0.5)).isZero();
    }

    @Test
    void aSlowOutlierMovesTheTailNotTheMedian() {
        Timer timer = timer();
        for (int i = 0; i < 99; i++) {
            timer.record(100, TimeUnit.MICROSECONDS);
        }
        timer.record(2, TimeUnit.SECONDS);
        assertThat(NodeMetrics.quantileSeconds(timer.takeSnapshot().histogramCounts(), 0.5)).isLessThan(150e-6);
        assertThat(NodeMetrics.quantileSeconds(timer.takeSnapshot().histogramCounts(), 0.999)).isGreaterThan(1.0);
    }
}
