package io.pagewire.node.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * receive-faults at its reduced size (8 MiB into a receiver with 2 MiB of memory, WRITEs and SENDs):
 * each design answers a missing page its own way — PIN_ON_MISS stalls and never NAKs, SHADOW parks
 * within its buffer and never NAKs, ON_DEMAND NAKs and retransmits — and every message arrives.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class ReceiveFaultsExperimentTest {
    @Test
    void eachDesignAnswersAMissingPageItsOwnWay() throws Exception {
        ExperimentResult result = new ReceiveFaultsExperiment().run(new ExperimentSettings(1, true), new PrintWriter(new StringWriter()));
        String table = ExperimentReport.table(result);
        System.out.println(table);
        result.claims().forEach(claim -> System.out.println(claim.line()));

        assertThat(result.rows()).as("WRITE and SEND under three modes").hasSize(6);
        assertThat(result.claims()).hasSize(3);
        for (Claim claim : result.claims()) {
            assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
        }
        for (var row : result.rows()) {
            assertThat((long) row.get(12)).as("the region went to swap and came back: major faults under " + row.get(1)).isPositive();
        }
    }
}
