package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.experiment.Claim;
import io.pagewire.tools.experiment.ContextCacheExperiment;
import io.pagewire.tools.experiment.ExperimentReport;
import io.pagewire.tools.experiment.ExperimentResult;
import io.pagewire.tools.experiment.ExperimentSettings;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The context-cache experiment at its reduced size: ib_write_bw over 8 and 256 queue pairs through the
 * verbs library, the nodes' NICs given a 64-entry context cache. What the meters count is asserted
 * (no miss while the pairs fit, most messages missing once they outgrow it); the rate claim is judged
 * and printed, since a 2-core machine moves a message rate by tens of percent between runs.
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class ContextCacheExperimentTest {
    @BeforeAll
    static void theLibraryOfThisBuild() {
        VerbsPrograms.requireLibrary();
        System.setProperty("pagewire.verbs.library", VerbsPrograms.LIBRARY.toString());
    }

    @Test
    void messagesMissTheContextCacheOnlyOnceTheirQueuePairsOutgrowIt() throws Exception {
        StringWriter progress = new StringWriter();
        ExperimentResult result = new ContextCacheExperiment().run(new ExperimentSettings(1, true), new PrintWriter(progress));
        String table = ExperimentReport.table(result);
        System.out.println(progress + table);
        result.claims().forEach(claim -> System.out.println(claim.line()));
        assertThat(result.rows()).as("8 and 256 pairs, without and with the cache").hasSize(4);
        for (String counted : List.of("while the contexts in use fit the cache", "once they outgrow it")) {
            Claim c = result.claims().stream().filter(claim -> claim.statement().startsWith(counted)).findFirst().orElseThrow();
            assertThat(c.reproduced()).as(c.line() + "\n" + table).isTrue();
        }
    }
}
