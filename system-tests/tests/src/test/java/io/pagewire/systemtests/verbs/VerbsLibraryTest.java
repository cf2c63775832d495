package io.pagewire.systemtests.verbs;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.PagewireNode;
import io.pagewire.node.nic.Lids;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicCounters;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.systemtests.verbs.VerbsPrograms.Program;
import io.pagewire.systemtests.verbs.VerbsPrograms.Run;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Unmodified verbs programs on two nodes through the verbs library: Debian's ibverbs-utils, rdma-core's
 * examples and perftest, each run as it would run on an RDMA NIC (the server on node-2, the client on
 * node-1, exchanging LIDs and queue pair numbers over TCP), plus the library's own check of what a verbs
 * program may rely on. After each test every node holds no session, pin or frame (the fixture checks).
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class VerbsLibraryTest extends TwoNodeProgramsFixture {


    @Test
    void ibvDevicesAndDevinfoListTheDeviceItsPortAndItsOdpCapabilities() throws Exception {
        Run devices = VerbsPrograms.run(client.target(), 30, "ibv_devices").succeeded();
        assertThat(devices.output()).contains("pagewire0");
        Run info = VerbsPrograms.run(client.target(), 30, "ibv_devinfo", "-v").succeeded();
        assertThat(info.output()).contains("hca_id:\tpagewire0", "PORT_ACTIVE", "InfiniBand", "ODP_SUPPORT", "ODP_SUPPORT_IMPLICIT",
                "SUPPORT_WRITE", "SUPPORT_READ", "SUPPORT_ATOMIC", "SUPPORT_SRQ", "ATOMIC_HCA")
                .containsPattern("port_lid:\\s+" + Lids.of(client.id()) + "\\b");
    }

    @Test
    void aVerbsProgramsGuaranteesHoldAcrossTwoNodes() throws Exception {
        Run check = VerbsPrograms.run(client.target() + "," + server.target(), 60, VerbsPrograms.DIRECTORY.resolve("bin/pagewire-verbs-check")
                .toString());
        assertThat(check.output()).as(check.output()).doesNotContain("FAIL").contains("ok bad-rkey", "ok fetch-add", "PASSED");
        check.succeeded();
    }

    /**
     * RC's semantics case by case, as the specification and Soft-RoCE have them: ibv_modify_qp's
     * transition table, ERROR flushing in order, RESET and a second connection, timeout/retry_cnt and
     * rnr_retry, zero-length and element-free requests, scatter/gather, FENCE, SOLICITED, a sized CQ that
     * overflows, the fetched word in the requester's buffer, the queue pair events, a destroy right
     * after a burst of posts, ibv_rereg_mr of access, translation and protection domain, ibv_resize_cq below
     * what the CQ holds, an atomic without the pair's remote atomic access, a full receive queue, and UD's zero-byte
     * datagrams, completion events and extended API.
     */
    @Test
    void rcSemanticsConformToTheStandardCaseByCase() throws Exception {
        Run run = VerbsPrograms.run(client.target() + "," + server.target(), 120,
                VerbsPrograms.DIRECTORY.resolve("bin/pagewire-verbs-conformance").toString());
        assertThat(run.output()).as(run.output()).doesNotContain("FAIL").contains("ok error-flushes-sends-then-receives-in-order",
                "ok reset-pair-connects-again", "ok retry-cnt-ends-in-retry-exc-err", "ok fence-orders-a-write-after-the-read-before-it",
                "ok cq-overflow-raises-cq-err-and-keeps-its-size", "ok srq-pair-in-error-raises-last-wqe-reached",
                "ok destroy-right-after-posts", "ok rereg-access-refuses-what-it-took-away", "ok rereg-translation-moves-the-registration",
                "ok rereg-pd-takes-the-region-from-the-old-pd", "ok resize-cq-below-held-fails", "ok atomic-without-remote-atomic-access",
                "ok post-recv-to-a-full-queue-is-enomem", "ok full-receive-queue-stays-usable", "ok ud-zero-byte-send-arrives-as-grh-only",
                "ok ud-completion-event-wakes-the-channel", "ok ud-through-qp-ex-and-cq-ex", "ok cm-qp-draws-from-the-callers-srq",
                "ok cm-ep-leaves-the-callers-srq", "PASSED")
                .as("posts made before a destroy reach the pair (the library warns of each post the node refused)")
                .doesNotContain("refused work request");
        run.succeeded();
    }

    /**
     * Small malloc'd buffers, sharing pages with each other and the heap's own bookkeeping, registered
     * (twice now and then, in one protection domain and in two) and torn down in every order from three
     * threads: no neighbour loses a byte and the heap stays whole (the library once copied a page into a
     * heap buffer that could lie in the very page it replaced: "free(): invalid pointer").
     */
    @Test
    void registrationsOfMallocdBuffersTornDownInAnyOrderLeaveTheHeapWhole() throws Exception {
        long seed = Long.getLong("pagewire.verbs.seed", System.nanoTime() & 0xffffffffL);
        Run run = VerbsPrograms.run(client.target(), 90, VerbsPrograms.DIRECTORY.resolve("bin/pagewire-verbs-teardown").toString(), "10",
                String.valueOf(seed), "3");
        assertThat(run.output()).as(run.output()).doesNotContain("FAIL", "cannot give").contains("ok teardown");
        run.succeeded();
    }

    /**
     * The corners of the API that once fell through to the real libibverbs and crashed there (the GID
     * table, a bad GID index, dma-buf and multicast registrations, imports, ECE, rereg, rates, fork),
     * answered as Soft-RoCE answers them, with the library preloaded and in libibverbs' place.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"LD_PRELOAD", "LD_LIBRARY_PATH"})
    void theApisCornersAnswerAsSoftRoceDoes(String loading) throws Exception {
        List<String> environment = loading.equals("LD_PRELOAD") ? List.of()
                : List.of("LD_PRELOAD=", "LD_LIBRARY_PATH=" + VerbsPrograms.DIRECTORY.resolve("lib"));
        Run run = VerbsPrograms.start(client.target() + "," + server.target(), environment,
                VerbsPrograms.DIRECTORY.resolve("bin/pagewire-verbs-check").toString(), "api").await(60);
        assertThat(run.output()).as(run.output()).doesNotContain("FAIL").contains("ok query-gid-table", "ok rereg-translation",
                "ok same-page-two-contexts-keeps-bytes", "shares pages with a registration of another context", "PASSED");
        run.succeeded();
    }

    static Stream<Arguments> pingpongOptions() {
        return Stream.of(Arguments.of(""), Arguments.of("-e"), Arguments.of("-c"), Arguments.of("-o"), Arguments.of("-o -P"),
                Arguments.of("-O"), Arguments.of("-O -P -c"), Arguments.of("-e -c -s 65536"));
    }

    @ParameterizedTest(name = "ibv_rc_pingpong {0}")
    @MethodSource("pingpongOptions")
    void rcPingpongCompletesBetweenTheNodes(String options) throws Exception {
        pair("ibv_rc_pingpong", options.isEmpty() ? List.of("-n", "200") : concat(List.of("-n", "200"), options.split(" ")));
    }

    @Test
    void ucPingpongCompletesBetweenTheNodes() throws Exception {
        pair("ibv_uc_pingpong", List.of("-n", "200"));
    }

    static Stream<Arguments> ucPerftests() {
        List<Arguments> all = new ArrayList<>();
        for (RegistrationMode mode : RegistrationMode.values()) {
            all.add(Arguments.of("ib_write_bw", mode.name()));
        }
        // A UC SEND that finds its buffer not resident is dropped, and perftest's receiver then waits for ever (as on a NIC
        // that drops on a fault): SENDs run where the buffer's pages are pinned or pinned on arrival.
        all.add(Arguments.of("ib_send_bw", RegistrationMode.PINNED.name()));
        all.add(Arguments.of("ib_send_bw", RegistrationMode.PIN_ON_MISS.name()));
        all.add(Arguments.of("ib_write_lat", RegistrationMode.PINNED.name()));
        all.add(Arguments.of("ib_send_lat", RegistrationMode.PINNED.name()));
        return all.stream();
    }

    /**
     * UC through the same NIC, under the registration modes it can run under: the programs complete,
     * the receiving node registers in the mode given, and it acknowledges nothing (no packet back for the bw runs).
     */
    @ParameterizedTest(name = "{0} -c UC under {1}")
    @MethodSource("ucPerftests")
    void perftestOverUnreliableConnectedPairs(String program, String mode) throws Exception {
        unreliablePerftest("UC", program, mode);
    }

    @Test
    void udPingpongCompletesBetweenTheNodes() throws Exception {
        long dropsBefore = udDrops(server);
        pair("ibv_ud_pingpong", List.of("-n", "200"));
        assertThat(udDrops(server) - dropsBefore).as("datagrams the receiving node dropped; counters:%n%s", server.nic().counters()).isZero();
    }

    private static long tlbLookups(PagewireNode node) {
        return node.nic().counters().get(NicCounter.TLB_HITS) + node.nic().counters().get(NicCounter.TLB_MISSES);
    }

    /** Every datagram dropped, by any cause. */
    private static long udDrops(PagewireNode node) {
        long sum = 0;
        for (NicCounter c : List.of(NicCounter.UNRELIABLE_DROPPED_NO_RECEIVE, NicCounter.UNRELIABLE_DROPPED_FAULT, NicCounter.UNRELIABLE_DROPPED_QKEY,
                NicCounter.UNRELIABLE_DROPPED_REFUSED, NicCounter.UNRELIABLE_DROPPED_TOO_LONG, NicCounter.UNRELIABLE_DROPPED_UNREACHABLE)) {
            sum += node.nic().counters().get(c);
        }
        return sum;
    }

    static Stream<Arguments> udPerftests() {
        List<Arguments> all = new ArrayList<>();
        for (RegistrationMode mode : RegistrationMode.values()) {
            all.add(Arguments.of("ib_send_bw", mode.name()));
        }
        for (RegistrationMode mode : RegistrationMode.values()) {
            all.add(Arguments.of("ib_send_lat", mode.name()));
        }
        return all.stream();
    }

    /**
     * UD through the same NIC, under each registration mode: perftest's datagrams complete and land (one
     * receive each), with what UC's runs show besides.
     */
    @ParameterizedTest(name = "{0} -c UD under {1}")
    @MethodSource("udPerftests")
    void perftestOverUnreliableDatagramPairs(String program, String mode) throws Exception {
        long receives = server.nic().counters().get(NicCounter.RECEIVES_COMPLETED);
        unreliablePerftest("UD", program, mode);
        assertThat(server.nic().counters().get(NicCounter.RECEIVES_COMPLETED) - receives).as("datagrams received; counters:%n%s",
                server.nic().counters()).isGreaterThanOrEqualTo(300);
    }

    /**
     * A perftest program over an unreliable transport under a registration mode, 300 iterations: it
     * completes, the receiving node registers in the mode given (and looks up the TLB under the modes
     * that translate through it), and it sends nothing back for the bw runs (no acknowledgement).
     */
    private void unreliablePerftest(String transport, String program, String mode) throws Exception {
        RegistrationMode registration = RegistrationMode.valueOf(mode);
        Meters before = Meters.of(server);
        long sentByServer = server.nic().counters().get(NicCounter.PACKETS_SENT);
        long receivedByServer = server.nic().counters().get(NicCounter.PACKETS_RECEIVED);
        long lookups = tlbLookups(server);
        int port = freePort();
        List<String> args = new ArrayList<>(List.of(program, "-d", "pagewire0", "-p", String.valueOf(port), "-c", transport, "-n", "300"));
        if (program.endsWith("_bw") && transport.equals("UC")) {
            args.addAll(List.of("-s", "8192")); // UD's messages are an MTU at most: perftest picks its size
        }
        List<String> env = List.of("PAGEWIRE_VERBS_REGISTRATION=" + mode);
        Program s = VerbsPrograms.start(server.target(), env, args.toArray(String[]::new));
        VerbsPrograms.awaitListening(port, 30_000); // its out-of-band exchange with the client
        args.add("127.0.0.1");
        Program c = VerbsPrograms.start(client.target(), env, args.toArray(String[]::new));
        Run clientRun = c.await(120).succeeded();
        s.await(30).succeeded();
        assertThat(clientRun.output()).contains("#bytes");
        assertThat(server.nic().counters().get(NicCounter.PACKETS_RECEIVED) - receivedByServer).isPositive();
        assertThat(Meters.of(server).registrations(registration) - before.registrations(registration))
                .as("%s registrations; counters:%n%s", mode, server.nic().counters()).isPositive();
        if (registration == RegistrationMode.PIN_ON_MISS || registration == RegistrationMode.ON_DEMAND) {
            assertThat(tlbLookups(server) - lookups).as("TLB lookups on the receiving node (the modes that translate through it); counters:%n%s",
                    server.nic().counters()).isPositive();
        }
        if (program.endsWith("_bw")) {
            assertThat(server.nic().counters().get(NicCounter.PACKETS_SENT) - sentByServer)
                    .as("packets the receiving node sent; counters:%n%s", server.nic().counters()).isZero();
        }
    }

    @Test
    void srqPingpongCompletesBetweenTheNodes() throws Exception {
        pair("ibv_srq_pingpong", List.of("-n", "100", "-q", "4"));
    }

    static Stream<Arguments> perftests() {
        List<Arguments> all = new ArrayList<>();
        for (String program : List.of("ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw", "ib_send_lat",
                "ib_atomic_bw", "ib_atomic_lat")) {
            all.add(Arguments.of(program, false));
            all.add(Arguments.of(program, true));
        }
        return all.stream();
    }

    @ParameterizedTest(name = "{0} odp={1}")
    @MethodSource("perftests")
    void perftestCompletesAndTheReceivingNodeCountsItUnderTheModeItsRegistrationsGot(String program, boolean odp) throws Exception {
        RegistrationMode mode = odp ? RegistrationMode.ON_DEMAND : RegistrationMode.PINNED;
        Meters before = Meters.of(server);
        List<String> options = new ArrayList<>(List.of("-n", "300"));
        if (program.endsWith("_bw") && !program.startsWith("ib_atomic")) {
            options.addAll(List.of("-s", "8192"));
        }
        if (odp) {
            options.add("--odp");
        }
        if (odp && program.startsWith("ib_atomic")) {
            // perftest's own parameter check refuses this before it opens a device ("ODP does not support ATOMICS
            // for now", perftest_parameters.c); pagewire-verbs-check runs atomics on ON_DEMAND memory instead.
            Run refused = VerbsPrograms.run(client.target(), 30, concat(List.of(program, "-d", "pagewire0"), options.toArray(String[]::new))
                    .toArray(String[]::new));
            assertThat(refused.exitCode()).isEqualTo(1);
            assertThat(refused.output()).contains("ODP does not support ATOMICS");
            return;
        }
        Run[] runs = pair(program, options);
        assertThat(runs[1].output()).contains("#bytes");
        Meters after = Meters.of(server);
        // The program's buffer is registered in the mode asked for; the library's inline staging area in its plain mode (PINNED).
        assertThat(after.registrations(mode) - before.registrations(mode)).as("%s registrations on %s; counters:%n%s", mode, server.id(),
                server.nic().counters()).isPositive();
        for (RegistrationMode other : RegistrationMode.values()) {
            if (other != mode && other != RegistrationMode.PINNED) {
                assertThat(after.registrations(other) - before.registrations(other)).as("%s registrations", other).isZero();
            }
        }
        if (odp && !program.startsWith("ib_atomic")) {
            // ON_DEMAND translates through the NIC's TLB: the receiving side's lookups are counted under it.
            assertThat(after.lookups(mode) - before.lookups(mode)).as("%s TLB lookups on %s; counters:%n%s", mode, server.id(),
                    server.nic().counters()).isPositive();
        }
    }

    @ParameterizedTest(name = "PAGEWIRE_VERBS_REGISTRATION={0}")
    @ValueSource(strings = {"PIN_ON_MISS", "SHADOW"})
    void theLibrarysSettingChoosesTheModePlainRegistrationsGet(String name) throws Exception {
        RegistrationMode mode = RegistrationMode.valueOf(name);
        Meters before = Meters.of(server);
        int port = freePort();
        List<String> env = List.of("PAGEWIRE_VERBS_REGISTRATION=" + name);
        Program s = VerbsPrograms.start(server.target(), env, "ib_write_bw", "-d", "pagewire0", "-p", String.valueOf(port), "-n", "200");
        VerbsPrograms.awaitListening(port, 30_000);
        Program c = VerbsPrograms.start(client.target(), env, "ib_write_bw", "-d", "pagewire0", "-p", String.valueOf(port), "-n", "200",
                "127.0.0.1");
        c.await(120).succeeded();
        s.await(30).succeeded();
        Meters after = Meters.of(server);
        assertThat(after.registrations(mode) - before.registrations(mode)).as("%s registrations; counters:%n%s", mode,
                server.nic().counters()).isPositive();
        assertThat(after.registrations(RegistrationMode.PINNED) - before.registrations(RegistrationMode.PINNED)).isZero();
        if (mode == RegistrationMode.PIN_ON_MISS) {
            assertThat(after.lookups(mode) - before.lookups(mode)).as("TLB lookups; counters:%n%s", server.nic().counters()).isPositive();
        }
    }

    @Test
    void aProgramKilledMidRunEndsItsSessionAndTheNodesServeTheNext() throws Exception {
        int port = freePort();
        Program s = VerbsPrograms.start(server.target(), "ib_write_bw", "-d", "pagewire0", "-p", String.valueOf(port), "-D", "20");
        VerbsPrograms.awaitListening(port, 30_000);
        Program c = VerbsPrograms.start(client.target(), "ib_write_bw", "-d", "pagewire0", "-p", String.valueOf(port), "-D", "20",
                "127.0.0.1");
        awaitTrue(() -> client.sessions() == 1 && server.sessions() == 1 && client.nic().counters().get(NicCounter.BYTES_SENT) > 0, 30_000,
                "the programs opened their devices and data flows");
        c.kill();
        awaitTrue(() -> client.sessions() == 0, 20_000, "the killed program's session ended on " + client.id());
        s.kill();
        awaitTrue(() -> server.sessions() == 0, 20_000, "the server's session ended on " + server.id());
        pair("ibv_rc_pingpong", List.of("-n", "50"));
    }

    /**
     * Pollers that sleep at once (no idle time before the sleep) race the library's reader thread for the
     * bell's bytes on every message: the loser finds nothing to read, which is no reason to give the bell up.
     * A library that took it for the bell's end rang the node on its session stream from then on (a slower
     * path through the node's verbs threads), about 1,900 times in such a 3,000-message run.
     */
    @Test
    void pollersAsleepOnTheBellKeepItForEveryDoorbell() throws Exception {
        String port = String.valueOf(freePort());
        List<String> env = List.of("PAGEWIRE_VERBS_LOG=info", "PAGEWIRE_VERBS_SLEEP_AFTER_US=0", "PAGEWIRE_VERBS_SLEEP_AFTER_MAX_US=0");
        Program s = VerbsPrograms.start(server.target(), env, "stdbuf", "-oL", "ib_send_lat", "-d", "pagewire0", "-p", port, "-s", "8",
                "-n", "3000");
        s.awaitOutput("Waiting for client", 60);
        Run clientRun = VerbsPrograms.start(client.target(), env, "ib_send_lat", "-d", "pagewire0", "-p", port, "-s", "8", "-n", "3000",
                "127.0.0.1").await(120).succeeded();
        Run serverRun = s.await(30).succeeded();
        for (Run run : List.of(clientRun, serverRun)) {
            Matcher m = Pattern.compile("slept on the bell (\\d+) times, (\\d+) of them woken by it; it rang the node on its session stream (\\d+) times")
                    .matcher(run.output());
            assertThat(m.find()).as("the library's closing line; output:%n%s", run.output()).isTrue();
            assertThat(Long.parseLong(m.group(1))).as("polls that slept; output:%n%s", run.output()).isPositive();
            assertThat(Long.parseLong(m.group(3))).as("doorbells on the session stream; output:%n%s", run.output()).isZero();
        }
    }

    // ---- helpers --------------------------------------------------------------------------------------

    /** Runs a server on node-2 and its client on node-1; both must succeed. */
    private Run[] pair(String program, List<String> options) throws Exception {
        int port = freePort();
        List<String> args = new ArrayList<>(List.of(program, "-d", "pagewire0", "-p", String.valueOf(port)));
        args.addAll(options);
        Program s = VerbsPrograms.start(server.target(), args.toArray(String[]::new));
        VerbsPrograms.awaitListening(port, 30_000); // the server listens for the client's TCP exchange
        args.add("127.0.0.1");
        Program c = VerbsPrograms.start(client.target(), args.toArray(String[]::new));
        Run clientRun = c.await(120);
        Run serverRun = s.await(30);
        clientRun.succeeded();
        serverRun.succeeded();
        return new Run[] {serverRun, clientRun};
    }

    /** A node's registrations and TLB lookups by registration mode, at one moment. */
    private record Meters(NicCounters counters, long[] registrations, long[] lookups) {
        static Meters of(PagewireNode node) {
            NicCounters c = node.nic().counters();
            int n = RegistrationMode.values().length;
            long[] registrations = new long[n];
            long[] lookups = new long[n];
            for (RegistrationMode m : RegistrationMode.values()) {
                registrations[m.ordinal()] = c.get(NicCounter.REGISTRATIONS, m);
                lookups[m.ordinal()] = c.get(NicCounter.TLB_HITS, m) + c.get(NicCounter.TLB_MISSES, m);
            }
            return new Meters(c, registrations, lookups);
        }

        long registrations(RegistrationMode m) {
            return registrations[m.ordinal()];
        }

        long lookups(RegistrationMode m) {
            return lookups[m.ordinal()];
        }
    }


    private static List<String> concat(List<String> a, String[] b) {
        List<String> all = new ArrayList<>(a);
        all.addAll(List.of(b));
        return all;
    }
}
