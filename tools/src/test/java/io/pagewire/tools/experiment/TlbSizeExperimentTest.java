package io.pagewire.tools.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.node.TestData;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.TlbIndexing;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * tlb-size at its reduced size: the claims that do not depend on the machine's speed hold (the hit
 * rate never falls as the TLB grows, pinned pages stay within the TLB, a TLB twice the working set
 * nearly always hits); the throughput claim is printed, not asserted (a shared machine's noise).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TlbSizeExperimentTest {
    @Test
    void theHitRateGrowsWithTheTlbAndPinsStayWithinItsEntries() throws Exception {
        StringWriter progress = new StringWriter();
        ExperimentResult result = new TlbSizeExperiment(TlbIndexing.HASHED).run(new ExperimentSettings(20261124, true), new PrintWriter(progress));
        String table = ExperimentReport.table(result);
        System.out.println(table);
        result.claims().forEach(claim -> System.out.println(claim.line()));

        assertThat(result.rows()).as("3 patterns x 2 working sets x 3 TLB sizes").hasSize(18);
        List<Claim> claims = result.claims();
        assertThat(claims).hasSize(4);
        for (Claim claim : claims.subList(0, 3)) {
            assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
        }
        // The working set beyond physical memory really paged: major faults in its rows.
        assertThat(result.rows()).anyMatch(row -> (int) row.get(0) == 2048 && (long) row.get(6) > 0);
        assertThat(ExperimentReport.csv(result).lines().count()).isEqualTo(19);
    }

    /**
     * Against two nodes of a running cluster, whose TLB has one size (64 entries), the working set
     * sweeps (32 and 256 pages): the hit rate falls past the TLB's reach, the pins sampled from the
     * receiving node's meters stay within its entries, and a TLB twice the working set hits.
     */
    @Test
    void againstARunningClusterTheWorkingSetSweepsOverTheNodesTlb() throws Exception {
        try (EmbeddedCluster running = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.security().plaintext();
            c.kernel().physicalMemoryBytes(4L << 20).swapBytes(64L << 20);
            c.nic().tlbEntries(64).tlbWays(8);
        })) {
            StringWriter progress = new StringWriter();
            ExperimentResult result = new TlbSizeExperiment(TlbIndexing.HASHED).run(
                    new ExperimentSettings(20261124, true, OvercommitExperimentTest.cluster(running)), new PrintWriter(progress));
            String table = ExperimentReport.table(result);
            System.out.println(progress + table);
            result.claims().forEach(claim -> System.out.println(claim.line()));

            assertThat(progress.toString()).contains("against node-1 and node-2 of a running cluster", "its TLB has 64 entries", "[32, 256]");
            assertThat(result.rows()).as("3 patterns x 2 working sets").hasSize(6).allMatch(row -> (int) row.get(2) == 64);
            assertThat(result.claims()).hasSize(4);
            assertThat(result.claims().get(0).line()).contains("outgrows the TLB's reach");
            for (Claim claim : result.claims().subList(0, 3)) {
                assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
            }
            TestData.awaitTrue(() -> running.node(2).nic().endpoints().isEmpty(), 10_000, "the experiment's endpoint closed");
            assertThat(running.node(2).kernel().stats().pinnedPages()).as("pins left on the receiving node").isZero();
        }
    }
}
