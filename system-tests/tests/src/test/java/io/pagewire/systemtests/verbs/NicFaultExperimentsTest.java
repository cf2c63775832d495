package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.node.NodeContext;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.FaultAnswer;
import io.pagewire.tools.experiment.Claim;
import io.pagewire.tools.experiment.ExperimentReport;
import io.pagewire.tools.experiment.ExperimentResult;
import io.pagewire.tools.experiment.ExperimentSettings;
import io.pagewire.tools.experiment.FaultCostExperiment;
import io.pagewire.tools.experiment.OdpPitfallsExperiment;
import io.pagewire.tools.experiment.PrefetchExperiment;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The experiments on NIC page faults that run stock programs (perftest, ibv_rc_pingpong) through the
 * verbs library, at their reduced size: what they count is asserted, since it does not depend on the
 * machine's speed; the timing claims are judged and printed (a shared 2-core machine moves a typical
 * round trip by tens of microseconds between runs).
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class NicFaultExperimentsTest {
    @BeforeAll
    static void theLibraryOfThisBuild() {
        VerbsPrograms.useLibraryOfThisBuild();
    }

    private static ExperimentResult print(ExperimentResult result, StringWriter progress) {
        System.out.println(progress + ExperimentReport.table(result));
        result.claims().forEach(claim -> System.out.println(claim.line()));
        return result;
    }

    private static Claim claim(ExperimentResult result, String startsWith) {
        return result.claims().stream().filter(c -> c.statement().startsWith(startsWith)).findFirst().orElseThrow();
    }

    /**
     * fault-cost: ib_write_lat and ib_read_lat under each mode, the responder's page taken from the NIC
     * after every touch. Every iteration meets the fault its mechanism gives (a TLB miss and pin, a NIC
     * page fault and RNR NAK, a major fault in most), SHADOW's table needs none for a page in memory,
     * and nothing faults without the pressure.
     */
    @Test
    void faultCostCountsTheFaultEachMechanismTakes() throws Exception {
        StringWriter progress = new StringWriter();
        ExperimentResult result = print(new FaultCostExperiment().run(new ExperimentSettings(1, true), new PrintWriter(progress)), progress);
        String table = ExperimentReport.table(result);
        assertThat(result.rows()).as("7 ib_write_lat runs and 10 ib_read_lat runs").hasSize(17);
        for (String accounted : List.of("a shadow page table follows the kernel's", "the node's meters account for the faults")) {
            Claim c = claim(result, accounted);
            assertThat(c.reproduced()).as(c.line() + "\n" + table).isTrue();
        }
        for (List<Object> row : result.rows()) {
            if (row.get(1).equals("ON_DEMAND") && !row.get(2).equals("none")) {
                assertThat((long) row.get(8)).as("RNR NAKs of " + row + "\n" + table).isGreaterThanOrEqualTo((long) row.get(3) / 2);
            }
        }
    }

    /**
     * prefetch: ibv_rc_pingpong over implicit ODP faults on its buffers' first use (an RNR NAK for the
     * receive buffer) unless -P prefetches them, which leaves no fault; an explicit registration maps
     * its resident pages when it is made, so it has none either way.
     */
    @Test
    void prefetchRemovesTheFirstUseFaultsOfAnImplicitRegistration() throws Exception {
        StringWriter progress = new StringWriter();
        ExperimentResult result = print(new PrefetchExperiment().run(new ExperimentSettings(1, true), new PrintWriter(progress)), progress);
        String table = ExperimentReport.table(result);
        assertThat(result.rows()).as("two registrations, with and without -P, one exchange and many").hasSize(8);
        for (String counted : List.of("prefetching an implicit on-demand registration", "an explicit on-demand registration maps")) {
            Claim c = claim(result, counted);
            assertThat(c.reproduced()).as(c.line() + "\n" + table).isTrue();
        }
    }

    /**
     * odp-pitfalls: a NIC fault answered with RNR NAK never waits for a timeout; one whose request is
     * dropped waits for one each (a dropped request per fault, a timeout per dropped request, each of
     * those iterations at least the timeout long); under loss every timeout is a lost packet's, a lost
     * RNR NAK's included; and a fault served in place (PIN_ON_MISS) is never dropped.
     */
    @Test
    void odpPitfallsCountATimeoutForEveryDroppedFaultAndLoss() throws Exception {
        StringWriter progress = new StringWriter();
        ExperimentResult result = print(new OdpPitfallsExperiment().run(new ExperimentSettings(1, true), new PrintWriter(progress)), progress);
        String table = ExperimentReport.table(result);
        assertThat(result.rows()).as("six cases").hasSize(6);
        for (String counted : List.of("a fault whose request the NIC drops", "faults and loss together", "serving the fault in place")) {
            Claim c = claim(result, counted);
            assertThat(c.reproduced()).as(c.line() + "\n" + table).isTrue();
        }
        List<Object> rnr = result.rows().get(1);
        assertThat(rnr.get(0)).isEqualTo("faults, RNR NAK");
        assertThat((long) rnr.get(11)).as("timeouts with faults answered by RNR NAK and no loss\n" + table).isZero();
    }

    /**
     * Against a running cluster on this host (two nodes started with a MINOR pressure after every
     * touch), fault-cost runs over the pressure the nodes were started with: PINNED, whose pages are
     * never taken, is each program's reference, the other modes meet a fault an iteration and the
     * meters account for each. Nodes started without a pressure are refused, saying how to start them.
     */
    @Test
    void faultCostRunsOverTheMemoryPressureARunningClustersNodesWereStartedWith() throws Exception {
        try (EmbeddedCluster running = cluster(c -> c.nic().reclaimAfterAccess(1.0))) {
            StringWriter progress = new StringWriter();
            ExperimentResult result = print(new FaultCostExperiment().run(new ExperimentSettings(1, true, against(running)),
                    new PrintWriter(progress)), progress);
            String table = ExperimentReport.table(result);
            assertThat(progress.toString()).contains("of a running cluster").contains("a page taken after 100 % of touches");
            assertThat(result.rows()).as("PINNED and the three modes it takes pages from, under both programs").hasSize(8);
            for (String accounted : List.of("a shadow page table follows the kernel's", "the node's meters account for the faults")) {
                Claim c = claim(result, accounted);
                assertThat(c.reproduced()).as(c.line() + "\n" + table + "\n" + counters(running)).isTrue();
            }
        }
        try (EmbeddedCluster unpressed = cluster(c -> { })) {
            assertThatThrownBy(() -> new FaultCostExperiment().run(new ExperimentSettings(1, true, against(unpressed)),
                    new PrintWriter(new StringWriter()))).isInstanceOf(IllegalArgumentException.class)
                    .hasMessageContaining("takes no pages from its NIC (pagewire.nic.reclaimAfterAccess=0)");
        }
    }

    /**
     * Against a running cluster whose nodes drop a request that faults and lose packets, odp-pitfalls
     * varies the registration: ON_DEMAND's timeouts are each a dropped request's or a loss's, and
     * PIN_ON_MISS, meeting the same pressure, drops nothing and sends no RNR NAK.
     */
    @Test
    void odpPitfallsRunOverTheFaultAnswerAndLossARunningClustersNodesWereStartedWith() throws Exception {
        try (EmbeddedCluster running = cluster(c -> {
            c.nic().reclaimAfterAccess(0.02).faultAnswer(FaultAnswer.DROP);
            c.fabric().lossRate(0.004).faultSeed(1);
        })) {
            StringWriter progress = new StringWriter();
            ExperimentResult result = print(new OdpPitfallsExperiment().run(new ExperimentSettings(1, true, against(running)),
                    new PrintWriter(progress)), progress);
            String table = ExperimentReport.table(result);
            assertThat(result.rows()).as("PINNED, ON_DEMAND and PIN_ON_MISS").hasSize(3);
            assertThat(result.rows().get(1).get(0)).isEqualTo("ON_DEMAND: faults, dropped, loss");
            for (Claim c : result.claims()) {
                assertThat(c.reproduced()).as(c.line() + "\n" + table + "\n" + counters(running)).isTrue();
            }
        }
    }

    /** prefetch changes no node's settings, so against a running cluster it counts the same first-use faults. */
    @Test
    void prefetchRunsAgainstARunningCluster() throws Exception {
        try (EmbeddedCluster running = cluster(c -> { })) {
            StringWriter progress = new StringWriter();
            ExperimentResult result = print(new PrefetchExperiment().run(new ExperimentSettings(1, true, against(running)),
                    new PrintWriter(progress)), progress);
            String table = ExperimentReport.table(result);
            assertThat(progress.toString()).contains("of a running cluster");
            for (String counted : List.of("prefetching an implicit on-demand registration", "an explicit on-demand registration maps")) {
                Claim c = claim(result, counted);
                assertThat(c.reproduced()).as(c.line() + "\n" + table + "\n" + counters(running)).isTrue();
            }
        }
    }

    /** Two nodes standing in for a running cluster: plaintext, the experiments' memory, then {@code configure}. */
    private static EmbeddedCluster cluster(Consumer<NodeContext> configure) {
        return EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.security().plaintext();
            c.kernel().physicalMemoryBytes(256L << 20).swapBytes(256L << 20);
            configure.accept(c);
        });
    }

    private static ExperimentSettings.RunningCluster against(EmbeddedCluster running) {
        return new ExperimentSettings.RunningCluster(running.node(1).target(), running.node(2).target(),
                ConnectOptions.defaults().withSecurity(ClientSecurity.plaintext()));
    }

    private static String counters(EmbeddedCluster running) {
        return "counters:\n" + running.node(1).nic().counters() + "\n" + running.node(2).nic().counters();
    }
}
