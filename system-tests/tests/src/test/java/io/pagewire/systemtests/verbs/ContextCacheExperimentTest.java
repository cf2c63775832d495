package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.node.Transport;
import io.pagewire.tools.experiment.Claim;
import io.pagewire.tools.experiment.ContextCacheExperiment;
import io.pagewire.tools.experiment.ExperimentReport;
import io.pagewire.tools.experiment.ExperimentResult;
import io.pagewire.tools.experiment.ExperimentSettings;
import io.pagewire.tools.testbed.EmbeddedCluster;
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
        VerbsPrograms.useLibraryOfThisBuild();
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

    /**
     * Against two nodes of a running cluster on this host, started with a 64-entry context cache, the
     * sweep runs over the cache they have (read from their meters, not resized) and counts its misses
     * from their meters: none at 8 pairs, most messages at 256. No rate claim is judged (there is no run
     * without the cache to compare with); a cluster without a cache is refused with a clear error.
     */
    @Test
    void againstARunningClusterTheSweepCountsMissesInTheCacheItsNodesWereStartedWith() throws Exception {
        try (EmbeddedCluster running = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.security().plaintext();
            c.kernel().physicalMemoryBytes(256L << 20).swapBytes(256L << 20).systemBufferBytes(64L << 20);
            c.nic().contextCacheEntries(64).contextCacheWays(8).queuePairsPerSession(256);
        })) {
            StringWriter progress = new StringWriter();
            ExperimentResult result = new ContextCacheExperiment().run(new ExperimentSettings(1, true, cluster(running)), new PrintWriter(progress));
            String table = ExperimentReport.table(result);
            System.out.println(progress + table);
            result.claims().forEach(claim -> System.out.println(claim.line()));
            assertThat(progress.toString()).contains("node-2's cache of 64 entries");
            assertThat(result.rows()).as("8 and 256 pairs over the cluster's cache").hasSize(2);
            assertThat(result.claims()).as("only the counting claims").hasSize(2);
            for (Claim c : result.claims()) {
                assertThat(c.reproduced()).as(c.line() + "\n" + table + "\ncounters:\n" + running.node(1).nic().counters() + "\n"
                        + running.node(2).nic().counters()).isTrue();
            }
        }
        try (EmbeddedCluster uncached = EmbeddedCluster.start(2, Transport.NETTY, c -> c.security().plaintext())) {
            assertThatThrownBy(() -> new ContextCacheExperiment().run(new ExperimentSettings(1, true, cluster(uncached)),
                    new PrintWriter(new StringWriter()))).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("models no context cache (pagewire.nic.contextCacheEntries=0)");
        }
    }

    private static ExperimentSettings.RunningCluster cluster(EmbeddedCluster running) {
        return new ExperimentSettings.RunningCluster(running.node(1).target(), running.node(2).target(),
                ConnectOptions.defaults().withSecurity(ClientSecurity.plaintext()));
    }
}
