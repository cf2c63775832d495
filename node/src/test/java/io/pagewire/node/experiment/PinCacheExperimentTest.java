package io.pagewire.node.experiment;

import static org.assertj.core.api.Assertions.assertThat;

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
}
