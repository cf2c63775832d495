package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.PagewireNode;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.systemtests.verbs.VerbsPrograms.Run;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Debian's OpenMPI 4.1 (openmpi-bin), unmodified, on two Pagewire nodes: verbs-c/test/mpi_check.c (a ping-pong of
 * 8 B to 4 MiB with every byte checked, MPI_Allreduce, MPI_Alltoall, and MPI_Put/MPI_Get through a window) under
 * {@code pml ucx} (with {@code osc ucx}) over UCX's rc_v and ud_v, and under {@code pml cm} with {@code mtl ofi}
 * over libfabric's {@code verbs;ofi_rxm}. Each rank starts through the launcher, which names its node; the MCA
 * parameters are those docs/verbs.md gives, with why.
 */
@Timeout(value = 6, unit = TimeUnit.MINUTES)
class MpiOnPagewireTest extends SdkFixture {
    private static final Path CHECK = VerbsPrograms.DIRECTORY.resolve("bin/pagewire-mpi-check");
    private PagewireNode first;
    private PagewireNode second;

    @BeforeEach
    void twoNodes() {
        VerbsPrograms.requireLibrary();
        assertThat(Path.of("/usr/bin/mpirun")).as("mpirun (Debian's openmpi-bin, which the build installs)").exists();
        assertThat(CHECK).as("the MPI check program the build makes with mpicc").exists();
        // An OpenMPI rank registers about 120 MiB of UCX's pools, two ranks of a node twice that: more than a 256 MiB node
        // may pin (three quarters of it, half of that for one application).
        start(2, context -> context.kernel().physicalMemoryBytes(1L << 30).swapBytes(1L << 30));
        first = cluster.node(1);
        second = cluster.node(2);
    }

    /**
     * Every registration mode on both ranks. Under PIN_ON_MISS and ON_DEMAND a UD send gathered from UCX's header and
     * its payload once came out with the header overwritten when the payload's page had to be pinned or faulted in,
     * and UCX's wire-up asserted in MPI_Init ("acked_psn=256 must be smaller than current_psn=1").
     */
    @ParameterizedTest(name = "pml ucx over {0} under {1}")
    @CsvSource({"rc_v, PINNED", "rc_v, SHADOW", "ud_v, PINNED", "ud_v, SHADOW", "rc_v, PIN_ON_MISS", "rc_v, ON_DEMAND", "ud_v, PIN_ON_MISS",
        "ud_v, ON_DEMAND"})
    void pmlUcxMovesEveryByteRight(String transports, String mode) throws Exception {
        Run run = mpirun(ucx(transports, mode), 1, "2");
        assertPingPongAndChecks(run, 2);
    }

    /** Four ranks, two on each node: the collectives and the window across nodes and within one (a node's own loopback). */
    @Test
    void collectivesAcrossFourRanksOnTwoNodes() throws Exception {
        Run run = mpirun(ucx("rc_v", "PINNED"), 2, "0");
        assertThat(run.output()).as(run.output()).contains("mpi_check: ok, 4 ranks");
        run.succeeded();
    }

    /** pml cm with libfabric's verbs;ofi_rxm provider under it: the MTL path of OpenMPI. */
    @Test
    void pmlCmOverLibfabricsVerbsRxm() throws Exception {
        long received = second.nic().counters().get(NicCounter.PACKETS_RECEIVED);
        List<String> mca = List.of("--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "verbs;ofi_rxm",
                "--mca", "btl", "^openib", "--mca", "osc", "^ucx");
        Run run = mpirun(new Launch(mca, List.of()), 1, "2");
        assertPingPongAndChecks(run, 2);
        assertThat(second.nic().counters().get(NicCounter.PACKETS_RECEIVED) - received).as("packets node-2 received").isPositive();
    }

    /** MCA parameters and environment for OpenMPI's UCX path. */
    private record Launch(List<String> mca, List<String> environment) {
    }

    /**
     * pml and osc ucx; openib off (it would open the device itself beside UCX); UCX's device list is limited to
     * mlx* unless opal_common_ucx_devices says otherwise; UCX_TLS keeps UCX off its shared-memory transports, which
     * ranks of one host would otherwise use instead of the nodes.
     */
    private static Launch ucx(String transports, String mode) {
        return new Launch(List.of("--mca", "pml", "ucx", "--mca", "osc", "ucx", "--mca", "btl", "^openib", "--mca", "opal_common_ucx_devices",
                "any"), List.of("UCX_TLS=" + transports, "UCX_NET_DEVICES=pagewire0:1", "PAGEWIRE_VERBS_REGISTRATION=" + mode));
    }

    /** mpirun with {@code perNode} ranks on each node (MPMD: each app context's launcher names its node). */
    private Run mpirun(Launch launch, int perNode, String iterations) throws Exception {
        List<String> command = new ArrayList<>(List.of("mpirun", "--allow-run-as-root", "--oversubscribe"));
        command.addAll(launch.mca());
        for (PagewireNode node : List.of(first, second)) {
            if (node == second) {
                command.add(":");
            }
            command.addAll(List.of("-np", String.valueOf(perNode), VerbsPrograms.LAUNCHER.toString(), "--node", node.target(), "--",
                    CHECK.toString(), iterations));
        }
        File log = File.createTempFile("pagewire-mpi-", ".log");
        log.deleteOnExit();
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log);
        builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_") || name.startsWith("UCX_") || name.equals("LD_PRELOAD"));
        for (String entry : launch.environment()) {
            int eq = entry.indexOf('=');
            builder.environment().put(entry.substring(0, eq), entry.substring(eq + 1));
        }
        Process p = builder.start();
        if (!p.waitFor(240, TimeUnit.SECONDS)) {
            p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
            return new Run(String.join(" ", command), -1, "timed out after 240 s\n" + Files.readString(log.toPath()));
        }
        return new Run(String.join(" ", command), p.exitValue(), Files.readString(log.toPath()));
    }

    private static void assertPingPongAndChecks(Run run, int ranks) {
        assertThat(run.output()).as(run.output()).contains("mpi_check: ok, " + ranks + " ranks");
        // every size from 8 bytes to 4 MiB, doubling
        assertThat(run.output().lines().filter(l -> l.startsWith("pingpong "))).as(run.output()).hasSize(20);
        assertThat(run.output()).contains("pingpong 8 ", "pingpong 262144 ", "pingpong 4194304 ");
        run.succeeded();
    }
}
