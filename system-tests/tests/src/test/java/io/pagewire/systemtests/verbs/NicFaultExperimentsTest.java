package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.experiment.Claim;
import io.pagewire.tools.experiment.ExperimentReport;
import io.pagewire.tools.experiment.ExperimentResult;
import io.pagewire.tools.experiment.ExperimentSettings;
import io.pagewire.tools.experiment.FaultCostExperiment;
import io.pagewire.tools.experiment.OdpPitfallsExperiment;
import io.pagewire.tools.experiment.PrefetchExperiment;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.List;
import java.util.concurrent.TimeUnit;
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
}
