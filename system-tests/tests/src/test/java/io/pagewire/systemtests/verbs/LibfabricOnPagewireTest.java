package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.nic.NicCounter;
import io.pagewire.systemtests.verbs.VerbsPrograms.Program;
import io.pagewire.systemtests.verbs.VerbsPrograms.Run;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * Debian's libfabric (libfabric-bin), unmodified, on Pagewire: its verbs provider lists the device's domain and
 * fabric, and fi_pingpong completes between two nodes over RDM endpoints ({@code verbs;ofi_rxm}) and over MSG
 * endpoints ({@code verbs}). The nodes answer to 127.0.1.1 and 127.0.1.2, which no interface of the host lists:
 * the library lists each as the device's interface, as an IPoIB port lists its own.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class LibfabricOnPagewireTest extends TwoNodeProgramsFixture {
    @Test
    void fiInfoListsTheDevicesDomainAndFabric() throws Exception {
        assertThat(Path.of("/usr/bin/fi_info")).as("fi_info (Debian's libfabric-bin, which the build installs)").exists();
        Run run = VerbsPrograms.launch(client.target(), List.of(), "fi_info", "-p", "verbs").await(60).succeeded();
        assertThat(run.output()).contains("provider: verbs;ofi_rxm", "fabric: IB-0xfe80000000000000", "domain: pagewire0", "type: FI_EP_RDM",
                "type: FI_EP_MSG");
    }

    @ParameterizedTest(name = "fi_pingpong -e {0} -p {1}")
    @CsvSource({"rdm, verbs;ofi_rxm", "msg, verbs"})
    void fiPingpongCompletesBetweenTheNodes(String endpoint, String provider) throws Exception {
        long received = server.nic().counters().get(NicCounter.PACKETS_RECEIVED);
        int control = freePort();
        Program s = VerbsPrograms.launch(server.target(), List.of(), "fi_pingpong", "-e", endpoint, "-p", provider, "-B", String.valueOf(control),
                "-I", "20");
        VerbsPrograms.awaitListening(control, 30_000);
        Run c = VerbsPrograms.launch(client.target(), List.of(), "fi_pingpong", "-e", endpoint, "-p", provider, "-P", String.valueOf(control),
                "-I", "20", "127.0.1.2").await(180);
        Run sr = s.await(60);
        assertThat(c.exitCode()).as("client:%n%s%nserver:%n%s", c.output(), sr.output()).isZero();
        sr.succeeded();
        // fi_pingpong's table: every size from 64 bytes to 1 MiB, 20 round trips each, all acknowledged
        assertThat(c.output()).as(c.output()).contains("bytes", "#sent").containsPattern("(?m)^64\\s+20\\s+=20").containsPattern("(?m)^1m\\s+20\\s+=20");
        assertThat(server.nic().counters().get(NicCounter.PACKETS_RECEIVED) - received)
                .as("packets the server's node received; counters:%n%s", server.nic().counters()).isPositive();
    }
}
