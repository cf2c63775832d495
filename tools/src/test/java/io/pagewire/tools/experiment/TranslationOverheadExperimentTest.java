package io.pagewire.tools.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * translation-overhead at its reduced size: a row per mode and one for fresh pages, each measured,
 * PINNED's own overhead zero, and both claims held: a warm translation of every mode costs within 5 %
 * of static pinning (the modes' pings take turns, so the machine's drift falls on all alike; they
 * differ by about 1 % here), and a write into a page never touched before (a fault and a pin on the
 * receive path) costs more than a warm one.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TranslationOverheadExperimentTest {
    @Test
    void everyWarmTranslationStaysWithinFivePercentOfPinningAndAFreshPageCostsMore() throws Exception {
        ExperimentResult result = new TranslationOverheadExperiment().run(new ExperimentSettings(1, true), new PrintWriter(new StringWriter()));
        String table = ExperimentReport.table(result);
        System.out.println(table);
        result.claims().forEach(claim -> System.out.println(claim.line()));

        assertThat(result.rows()).hasSize(5);
        assertThat(result.rows().get(0).get(0)).isEqualTo("PINNED");
        assertThat((double) result.rows().get(0).get(4)).as("PINNED against itself").isZero();
        for (var row : result.rows()) {
            assertThat((double) row.get(1)).as("round trip of " + row.get(0)).isPositive();
        }
        assertThat((double) result.rows().get(4).get(3)).as("a fresh page's fault and pin add latency\n" + table).isPositive();
        assertThat(result.claims()).hasSize(2);
        for (Claim claim : result.claims()) {
            assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
        }
    }
}
