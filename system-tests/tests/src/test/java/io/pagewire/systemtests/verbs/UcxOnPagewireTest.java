package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.PagewireNode;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.systemtests.verbs.VerbsPrograms.Program;
import io.pagewire.systemtests.verbs.VerbsPrograms.Run;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Debian's UCX on Pagewire, unmodified, through the verbs library and its connection manager: UCX
 * finds the device (its file under /dev/infiniband, which deploy/uverbs-device-files.sh makes, then
 * libibverbs' device list), lists its memory domain with rc_verbs and ud_verbs and rdmacm as a
 * connection manager, and ucx_perftest runs between two nodes over each transport. The nodes allow
 * the memory UCX registers up front (its receive pools are tens of MiB, more than the default
 * memlock limit, as on a host with a small {@code ulimit -l}).
 */
@Timeout(value = 5, unit = TimeUnit.MINUTES)
class UcxOnPagewireTest extends SdkFixture {
    private PagewireNode client;
    private PagewireNode server;

    @BeforeEach
    void twoNodes() {
        VerbsPrograms.requireLibrary();
        assertThat(Path.of("/dev/infiniband/uverbs0")).as("the device file the build makes (deploy/uverbs-device-files.sh)").exists();
        assertThat(Path.of("/usr/bin/ucx_perftest")).as("ucx_perftest (Debian's ucx-utils, which the build installs)").exists();
        start(2, context -> context.kernel().physicalMemoryBytes(1L << 30).swapBytes(256L << 20).memlockLimitBytes(2L << 30));
        client = cluster.node(1);
        server = cluster.node(2);
    }

    @Test
    void ucxInfoListsTheDeviceWithRcAndUdVerbsAndTheConnectionManager() throws Exception {
        Run run = VerbsPrograms.start(client.target(), List.of(), "ucx_info", "-d").await(60).succeeded();
        assertThat(run.output()).contains("Memory domain: pagewire0", "Component: ib", "Transport: rc_verbs", "Transport: ud_verbs",
                "Device: pagewire0:1", "Connection manager: rdmacm");
        // UCX posts receives and destroys the pair at once; the posts reach the pair before the destroy, not refused after it.
        assertThat(run.output()).doesNotContain("refused");
    }

    /**
     * UCX's own client/server example (libucx-dev's ucp_client_server.c, built unmodified): the client
     * connects to the server's listener by IP address, through UCX's rdmacm connection manager on
     * Pagewire's, and each tag message arrives and is checked. (The example's server serves clients
     * until it is stopped; it is stopped once the client is done.)
     */
    @Test
    void ucpClientServerConnectsThroughTheConnectionManager(@TempDir Path build) throws Exception {
        Path source = Path.of("/usr/share/doc/libucx-dev/examples/ucp_client_server.c");
        assertThat(source).as("UCX's example sources (Debian's libucx-dev, which the build installs)").exists();
        Path program = build.resolve("ucp_client_server");
        Process gcc = new ProcessBuilder("gcc", "-O2", "-o", program.toString(), source.toString(), "-I", source.getParent().toString(),
                "-lucp", "-lucs").redirectErrorStream(true).start();
        String compiled = new String(gcc.getInputStream().readAllBytes());
        assertThat(gcc.waitFor()).as("gcc: %s", compiled).isZero();
        long established = server.connectionManager().counters().established();
        String port = String.valueOf(TwoNodeProgramsFixture.freePort());
        List<String> env = List.of("UCX_TLS=rc_v", "UCX_NET_DEVICES=pagewire0:1");
        Program s = VerbsPrograms.start(server.target(), env, "stdbuf", "-oL", program.toString(), "-l", "127.0.1.2", "-p", port, "-c", "tag",
                "-i", "3");
        s.awaitOutput("server is listening", 60); // through rdma_cm: no TCP port to watch
        Run clientRun = VerbsPrograms.start(client.target(), env, program.toString(), "-a", "127.0.1.2", "-p", port, "-c", "tag", "-i", "3")
                .await(90).succeeded();
        s.kill();
        String served = s.output();
        assertThat(served).as(served).contains("server is listening on IP 127.0.1.2");
        // The client sends in each iteration and the server receives and checks it; the example prints the first and the last.
        assertThat(served).as(served).contains("Server: iteration #1", "Server: iteration #3", "UCP TEST SUCCESS").doesNotContain("unable to");
        assertThat(clientRun.output()).contains("Client: iteration #3");
        assertThat(server.connectionManager().counters().established() - established).as("connections the server's node established")
                .isPositive();
    }

    /**
     * UCX's progress loop polls its send CQ and its receive CQ in turn: once the context's CQs have polled empty for a
     * while (here at once), a poll sleeps on the context's bell, and the completion that ends the wait may land in the CQ
     * it is not polling (drained there by the library's reader thread). The bell must wake it all the same: most sleeps
     * of a ping-pong end on the bell, not on their 5 ms limit (the rest are UCX's wire-up, which waits on its sockets).
     * A poller that checked only its own CQ before sleeping let about half of them run out.
     */
    @Test
    void aPollerAsleepOnAnIdleCqIsWokenByTheOtherCqsCompletion() throws Exception {
        String port = String.valueOf(TwoNodeProgramsFixture.freePort());
        List<String> env = List.of("UCX_TLS=rc_v", "UCX_NET_DEVICES=pagewire0:1", "PAGEWIRE_VERBS_LOG=info",
                "PAGEWIRE_VERBS_SLEEP_AFTER_US=0", "PAGEWIRE_VERBS_SLEEP_AFTER_MAX_US=0", "PAGEWIRE_VERBS_SLEEP_US=5000");
        Program s = VerbsPrograms.start(server.target(), env, "stdbuf", "-oL", "ucx_perftest", "-p", port);
        s.awaitOutput("Waiting for connection", 60);
        Run clientRun = VerbsPrograms.start(client.target(), env, "ucx_perftest", "-p", port, "127.0.0.1", "-t", "tag_lat", "-n", "300")
                .await(180).succeeded();
        s.await(30).succeeded();
        Matcher m = Pattern.compile("slept on the bell (\\d+) times, (\\d+) of them woken by it").matcher(clientRun.output());
        long slept = 0;
        long woken = 0;
        while (m.find()) {
            slept += Long.parseLong(m.group(1));
            woken += Long.parseLong(m.group(2));
        }
        assertThat(slept).as("empty polls that slept; output:%n%s", clientRun.output()).isPositive();
        assertThat(woken).as("of %d sleeps, those the bell ended; counters:%n%s", slept, client.nic().counters()).isGreaterThanOrEqualTo(slept * 3 / 4);
    }

    static Stream<Arguments> perftests() {
        List<Arguments> all = new ArrayList<>();
        // UCP's tests, over RC (with UD for UCX's wire-up) and over UD alone.
        for (String transports : List.of("rc_v", "ud_v")) {
            all.add(Arguments.of(transports, "tag_lat", List.of("-n", "300")));
            all.add(Arguments.of(transports, "tag_bw", List.of("-n", "2000")));
            all.add(Arguments.of(transports, "ucp_put_bw", List.of("-n", "2000")));
            all.add(Arguments.of(transports, "ucp_am_lat", List.of("-n", "300")));
        }
        all.add(Arguments.of("rc_v", "ucp_put_lat", List.of("-n", "300")));
        all.add(Arguments.of("rc_v", "ucp_get", List.of("-n", "300")));
        // UCT's own tests name the transport and the device (rc_verbs has no short get: its gets are bcopy).
        all.add(Arguments.of("rc_verbs", "put_lat", List.of("-x", "rc_verbs", "-d", "pagewire0:1", "-n", "300")));
        all.add(Arguments.of("rc_verbs", "put_bw", List.of("-x", "rc_verbs", "-d", "pagewire0:1", "-n", "2000")));
        all.add(Arguments.of("rc_verbs", "get", List.of("-x", "rc_verbs", "-d", "pagewire0:1", "-D", "bcopy", "-n", "300")));
        all.add(Arguments.of("rc_verbs", "fadd", List.of("-x", "rc_verbs", "-d", "pagewire0:1", "-n", "300")));
        all.add(Arguments.of("rc_verbs", "am_lat", List.of("-x", "rc_verbs", "-d", "pagewire0:1", "-n", "300")));
        all.add(Arguments.of("ud_verbs", "am_lat", List.of("-x", "ud_verbs", "-d", "pagewire0:1", "-n", "300")));
        return all.stream();
    }

    @ParameterizedTest(name = "ucx_perftest -t {1} with UCX_TLS={0}")
    @MethodSource("perftests")
    void ucxPerftestRunsBetweenTheNodes(String transports, String test, List<String> options) throws Exception {
        long received = server.nic().counters().get(NicCounter.PACKETS_RECEIVED);
        long registrations = server.nic().counters().get(NicCounter.REGISTRATIONS);
        String port = String.valueOf(TwoNodeProgramsFixture.freePort());
        List<String> env = List.of("UCX_TLS=" + transports, "UCX_NET_DEVICES=pagewire0:1");
        Program s = VerbsPrograms.start(server.target(), env, "ucx_perftest", "-p", port);
        VerbsPrograms.awaitListening(Integer.parseInt(port), 60_000);
        List<String> args = new ArrayList<>(List.of("ucx_perftest", "-p", port, "127.0.0.1", "-t", test));
        args.addAll(options);
        Program c = VerbsPrograms.start(client.target(), env, args.toArray(String[]::new));
        Run clientRun = c.await(180);
        Run serverRun = s.await(30);
        clientRun.succeeded();
        serverRun.succeeded();
        assertThat(clientRun.output()).as(clientRun.output()).contains("Final:");
        assertThat(server.nic().counters().get(NicCounter.PACKETS_RECEIVED) - received)
                .as("packets the server's node received; counters:%n%s", server.nic().counters()).isPositive();
        assertThat(server.nic().counters().get(NicCounter.REGISTRATIONS) - registrations)
                .as("regions UCX registered on the server's node").isPositive();
    }
}
