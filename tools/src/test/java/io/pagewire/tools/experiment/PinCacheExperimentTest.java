package io.pagewire.tools.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.node.TestData;
import io.pagewire.node.Transport;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * pin-cache at its reduced size (a cache of 128 entries, pools of 32 and 1,024 pages): the cache hits
 * every write to a pool it holds and pins once per miss beyond it, unpinning as it evicts; SHADOW
 * pins nothing. The fourth claim, throughput, is judged and printed, not asserted: runs this short
 * (5,000 writes, a tenth of a second) vary by more than the pins cost them on a shared machine.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PinCacheExperimentTest {
    @Test
    void aPinningCachePinsPerMissAndTheShadowTableNever() throws Exception {
        ExperimentResult result = new PinCacheExperiment().run(new ExperimentSettings(1, true), new PrintWriter(new StringWriter()));
        String table = ExperimentReport.table(result);
        System.out.println(table);
        result.claims().forEach(claim -> System.out.println(claim.line()));

        assertThat(result.rows()).as("two pools, two modes").hasSize(4);
        assertThat(result.claims()).hasSize(4);
        for (Claim claim : result.claims().subList(0, 3)) {
            assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
        }
        assertThat((long) result.rows().get(2).get(3)).as("pins with a pool 8 times the cache\n" + table).isPositive();
    }

    /**
     * Against two nodes of a running cluster the pools are sized from the receiving node's TLB (128
     * entries: pools of 32 and 1,024 pages), its pin cost is read from its meters, and the counters
     * come from its meters too: the same three claims hold.
     */
    @Test
    void againstARunningClusterThePoolsFollowTheReceivingNodesTlb() throws Exception {
        try (EmbeddedCluster running = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.security().plaintext();
            c.kernel().physicalMemoryBytes(32L << 20).pinCostNs(2_000);
            c.nic().tlbEntries(128);
        })) {
            StringWriter progress = new StringWriter();
            ExperimentResult result = new PinCacheExperiment().run(new ExperimentSettings(1, true, OvercommitExperimentTest.cluster(running)),
                    new PrintWriter(progress));
            String table = ExperimentReport.table(result);
            System.out.println(progress + table);
            result.claims().forEach(claim -> System.out.println(claim.line()));

            assertThat(progress.toString()).contains("against node-1 and node-2 of a running cluster", "its TLB has 128 entries, a pin costs it 2.0 us");
            assertThat(result.rows()).extracting(row -> row.get(0)).containsExactly(32, 32, 1024, 1024);
            for (Claim claim : result.claims().subList(0, 3)) {
                assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
            }
            assertThat((long) result.rows().get(2).get(3)).as("pins with a pool 8 times the cache\n" + table).isPositive();
            TestData.awaitTrue(() -> running.node(2).nic().endpoints().isEmpty(), 10_000, "the experiment's endpoint closed");
        }
    }
}
