package io.pagewire.node.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * notification at its reduced size: every notification is noticed by each method, and both claims
 * are judged and printed, not asserted. Which method is cheapest or dearest is the machine's to say
 * here: on two cores a polling thread competes with the threads that deliver, and a blocked thread
 * sleeps on the session's doorbell and is woken by the node as a handler's agent is (one sleep in
 * the kernel each, since blocking waits stopped being woken through the agent), so their medians
 * fall within a few microseconds of each other, on either side. That a blocked thread is woken by
 * the doorbell itself is {@code SharedMemoryRingsTest}'s to show.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class NotificationExperimentTest {
    @Test
    void everyMethodNoticesEveryNotificationAndTheClaimsAreJudged() throws Exception {
        ExperimentResult result = new NotificationExperiment().run(new ExperimentSettings(1, true), new PrintWriter(new StringWriter()));
        String table = ExperimentReport.table(result);
        System.out.println(table);
        result.claims().forEach(claim -> System.out.println(claim.line()));

        assertThat(result.rows()).extracting(row -> row.get(0)).containsExactly("poll", "handler", "block");
        for (var row : result.rows()) {
            assertThat((long) row.get(1)).as(row.get(0) + " notifications timed").isEqualTo(1_000);
        }
        assertThat(result.claims()).extracting(Claim::statement)
                .containsExactly("polling the counter is the cheapest way to notice a notification", "blocking is the dearest");
        for (var row : result.rows()) {
            assertThat((double) row.get(3)).as(row.get(0) + ": p50 from the counter's change to detection, us, timed\n" + table).isPositive();
        }
    }
}
