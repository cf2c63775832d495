package io.pagewire.node.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * notification at its reduced size: every notification is noticed by each method, and blocking (a
 * wait that the thread delivering the change must wake) is the dearest. Whether polling beats a handler is the
 * machine's to say (on two cores a polling thread competes with the threads that deliver); the
 * claim is judged and printed, not asserted.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class NotificationExperimentTest {
    @Test
    void everyNotificationIsNoticedAndBlockingCostsMost() throws Exception {
        ExperimentResult result = new NotificationExperiment().run(new ExperimentSettings(1, true), new PrintWriter(new StringWriter()));
        String table = ExperimentReport.table(result);
        System.out.println(table);
        result.claims().forEach(claim -> System.out.println(claim.line()));

        assertThat(result.rows()).extracting(row -> row.get(0)).containsExactly("poll", "handler", "block");
        for (var row : result.rows()) {
            assertThat((long) row.get(1)).as(row.get(0) + " notifications timed").isEqualTo(1_000);
        }
        assertThat(result.claims()).hasSize(2);
        assertThat(result.claims().get(1).reproduced()).as(result.claims().get(1).line() + "\n" + table).isTrue();
    }
}
