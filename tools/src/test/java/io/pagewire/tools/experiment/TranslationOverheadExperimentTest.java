package io.pagewire.tools.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * translation-overhead at its reduced size: a row per mode and one for fresh pages, each measured,
 * PINNED's own overhead zero, and both claims judged and stated with the figures they were judged on.
 * Whether they hold (a warm translation within 5 % of static pinning, a fresh page dearer than a warm
 * one) is a relation between latencies, which a shared machine's noise decides as often as the code:
 * {@code pagewire experiment translation-overhead} reports it, docs/experiments.md shows its last run.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TranslationOverheadExperimentTest {
    @Test
    void everyModeAndAFreshPageAreMeasuredAndBothClaimsAreJudged() throws Exception {
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
        assertThat(result.claims()).hasSize(2);
        for (Claim claim : result.claims()) {
            assertThat(claim.line()).as("a claim states what it was judged on\n" + table).containsPattern("\\d+\\.\\d %");
        }
    }
}
