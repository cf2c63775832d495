package io.pagewire.node.experiment;

import static org.assertj.core.api.Assertions.assertThat;

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
}
