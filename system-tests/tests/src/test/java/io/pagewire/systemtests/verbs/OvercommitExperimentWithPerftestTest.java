package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.experiment.Claim;
import io.pagewire.tools.experiment.ExperimentReport;
import io.pagewire.tools.experiment.ExperimentResult;
import io.pagewire.tools.experiment.ExperimentSettings;
import io.pagewire.tools.experiment.OvercommitExperiment;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The overcommit experiment at its reduced size, both workloads: four applications written with the
 * SDK (4 MiB regions against a 10 MiB pin limit), then four ib_write_bw pairs through the verbs library
 * whose buffers are more than the nodes may pin. PINNED is refused past two and runs in turns,
 * ON_DEMAND ({@code --odp} for the programs) runs all four at once, and over a link with 200 us of
 * delay the on-demand job is the faster one with either workload.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class OvercommitExperimentWithPerftestTest {
    @BeforeAll
    static void theLibraryOfThisBuild() {
        VerbsPrograms.useLibraryOfThisBuild();
    }

    @Test
    void onDemandRunsEveryApplicationAtOnceAndFinishesSoonerWithTheSdkAndWithPerftest() throws Exception {
        StringWriter progress = new StringWriter();
        ExperimentResult result = new OvercommitExperiment().run(new ExperimentSettings(1, true), new PrintWriter(progress));
        String table = ExperimentReport.table(result);
        System.out.println(progress + table);
        result.claims().forEach(claim -> System.out.println(claim.line()));

        assertThat(result.rows()).as("two workloads, two link delays, two modes\n" + progress).hasSize(8);
        assertThat(result.rows().stream().map(row -> row.get(0)).distinct()).containsExactly("SDK writes", "ib_write_bw");
        for (List<Object> row : result.rows()) {
            String turns = row.get(0) + ", " + row.get(2) + "'s turns\n" + table;
            if (row.get(2).equals("ON_DEMAND")) {
                assertThat(row.get(3)).as(turns).isEqualTo("[4]");
            } else if (row.get(0).equals("SDK writes")) {
                assertThat(row.get(3)).as(turns).isEqualTo("[2, 2]");
            } else {
                // Programs register as they start, in any order: a pair whose one side took the last room while its other side was
                // refused leaves a turn to one application. Never more than two at once, never all in one turn.
                assertThat(row.get(3)).as(turns).isIn("[2, 2]", "[1, 2, 1]", "[2, 1, 1]", "[1, 1, 2]", "[1, 1, 1, 1]");
            }
        }
        for (Claim claim : result.claims()) {
            assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
        }
        assertThat(result.claims().get(0).evidence()).contains("refused: application 3: node pin limit", "Couldn't allocate MR (a 332 KiB pin limit)");
    }
}
