package io.pagewire.node.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * overcommit at its reduced size: four 4 MiB regions against a 10 MiB pin limit. PINNED is refused
 * past two and runs in two turns, ON_DEMAND runs all four at once, and over a link with 200 us of
 * delay (applications that leave the link idle) the on-demand job is the faster one.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class OvercommitExperimentTest {
    @Test
    void onDemandRunsEveryApplicationAtOnceAndFinishesSooner() throws Exception {
        ExperimentResult result = new OvercommitExperiment().run(new ExperimentSettings(1, true), new PrintWriter(new StringWriter()));
        String table = ExperimentReport.table(result);
        System.out.println(table);
        result.claims().forEach(claim -> System.out.println(claim.line()));

        assertThat(result.rows()).as("two link delays, two modes").hasSize(4);
        for (var row : result.rows()) {
            assertThat(row.get(2)).as(row.get(1) + "'s turns").isEqualTo(row.get(1).equals("PINNED") ? "[2, 2]" : "[4]");
        }
        for (Claim claim : result.claims()) {
            assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
        }
        assertThat(result.claims().get(0).evidence()).contains("refused: application 3: node pin limit");
    }
}
