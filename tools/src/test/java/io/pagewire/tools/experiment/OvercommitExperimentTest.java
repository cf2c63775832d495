package io.pagewire.tools.experiment;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.node.TestData;
import io.pagewire.node.Transport;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * overcommit against a running cluster: its job sized from the receiving node's own limits. The job on
 * nodes the experiment starts, with both workloads, is OvercommitExperimentWithPerftestTest's (the
 * system tests, where the verbs library and perftest are).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class OvercommitExperimentTest {
    /**
     * Against two nodes of a running cluster (started here, reached over TCP through the SDK) the job
     * is sized from the receiving node's own limits: a 10 MiB pin limit and 32 MiB of memory give four
     * 4 MiB applications, of which PINNED runs two at a time and ON_DEMAND all four. Nothing the
     * experiment opened stays on the nodes.
     */
    @Test
    void againstARunningClusterTheJobIsSizedFromTheReceivingNodesLimits() throws Exception {
        try (EmbeddedCluster running = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.security().plaintext();
            // The four applications connect from one host in plaintext: one caller to the node, whose share must be all of it.
            c.kernel().physicalMemoryBytes(32L << 20).nodePinLimitBytes(10L << 20).memlockLimitBytes(10L << 20).callerShare(1);
        })) {
            StringWriter progress = new StringWriter();
            ExperimentResult result = new OvercommitExperiment().run(new ExperimentSettings(1, true, cluster(running)), new PrintWriter(progress));
            String table = ExperimentReport.table(result);
            System.out.println(progress + table);
            result.claims().forEach(claim -> System.out.println(claim.line()));

            assertThat(progress.toString()).contains("against node-1 and node-2 of a running cluster", "4 applications of 4.0 MiB");
            assertThat(result.rows()).as("the cluster's link, two modes").hasSize(2);
            for (var row : result.rows()) {
                assertThat(row.get(1)).isEqualTo(OvercommitExperiment.CLUSTER_LINK);
                assertThat(row.get(3)).as(row.get(2) + "'s turns\n" + table).isEqualTo(row.get(2).equals("PINNED") ? "[2, 2]" : "[4]");
            }
            assertThat(result.claims().get(0).reproduced()).as(result.claims().get(0).line()).isTrue();
            assertThat(result.claims().get(0).evidence()).contains("refused: application 3: node pin limit 10 MiB exceeded");
            assertThat(result.claims().get(1).reproduced()).as(result.claims().get(1).line()).isTrue();
            TestData.awaitTrue(() -> running.nodes().stream().allMatch(n -> n.nic().endpoints().isEmpty()), 10_000,
                    "the experiment's endpoints on the running nodes closed");
            assertThat(running.node(2).kernel().stats().pinnedBytes()).as("pins left on the receiving node").isZero();
        }
    }

    /** Two nodes of {@code running}, as {@code pagewire experiment NAME HOST:PORT HOST:PORT --plaintext} gives them. */
    static ExperimentSettings.RunningCluster cluster(EmbeddedCluster running) {
        return new ExperimentSettings.RunningCluster(running.node(1).target(), running.node(2).target(),
                ConnectOptions.defaults().withSecurity(ClientSecurity.plaintext()));
    }
}
