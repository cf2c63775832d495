package io.pagewire.tools.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.node.TestData;
import io.pagewire.node.Transport;
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
            assertThat((long) row.get(13)).as("the region went to swap and came back: major faults under " + row.get(1)).isPositive();
        }
    }

    /**
     * Against two nodes of a running cluster (the receiver with 2 MiB of memory and 64 MiB of swap)
     * the region is sized from the receiving node (8 MiB), the workload runs through the SDK and the
     * counters come from the nodes' meters: each design still answers its own way.
     */
    @Test
    void againstARunningClusterEachDesignStillAnswersItsOwnWay() throws Exception {
        try (EmbeddedCluster running = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.security().plaintext();
            if (c.nodeId().equals("node-2")) {
                c.kernel().physicalMemoryBytes(2L << 20).swapBytes(64L << 20);
            }
        })) {
            StringWriter progress = new StringWriter();
            ExperimentResult result = new ReceiveFaultsExperiment().run(new ExperimentSettings(1, true, OvercommitExperimentTest.cluster(running)),
                    new PrintWriter(progress));
            String table = ExperimentReport.table(result);
            System.out.println(progress + table);
            result.claims().forEach(claim -> System.out.println(claim.line()));

            assertThat(progress.toString()).contains("against node-1 and node-2 of a running cluster", "2 MiB of memory and 64 MiB of swap: a region of 8 MiB");
            assertThat(result.rows()).as("WRITE and SEND under three modes").hasSize(6);
            for (Claim claim : result.claims()) {
                assertThat(claim.reproduced()).as(claim.line() + "\n" + table).isTrue();
            }
            for (var row : result.rows()) {
                assertThat((long) row.get(13)).as("major faults under " + row.get(1) + "\n" + table).isPositive();
            }
            TestData.awaitTrue(() -> running.nodes().stream().allMatch(n -> n.nic().endpoints().isEmpty()), 10_000, "the experiment's endpoints closed");
        }
    }
}
