package io.pagewire.tools.perf;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.Pagewire;
import io.pagewire.client.RegistrationMode;
import io.pagewire.examples.NotifyRing;
import io.pagewire.node.Transport;
import io.pagewire.node.fabric.FabricConfiguration;
import io.pagewire.node.metrics.ProcessCpu;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongSupplier;
import org.HdrHistogram.Histogram;

/**
 * The measurements of {@code pagewire bench}: Pagewire's data path beside the raw gRPC link under it
 * (and UCX over TCP where {@code ucx_perftest} is installed), every figure taken once per round, the
 * rounds interleaved (A B A B ...) so that drift on a shared machine hits both sides alike; and the
 * same data path over the configurations users run, each against its own link: host processes with
 * mutual TLS, and the nodes of a running testbed (the compose testbed's, reached as a user reaches
 * them) when one is given.
 *
 * <p>Figures are keyed by name; {@link BenchReport} turns the rounds into medians, ranges and ratios.
 */
public final class Bench {
    /**
     * The emulator's own figures are taken over a plain link: those node processes run plaintext (said
     * explicitly, as a local experiment), so TLS's cipher work is in neither Pagewire's figures nor the
     * baseline's. The secured configurations are measured beside them ({@link SecuredPair}).
     */
    private static final ConnectOptions PLAINTEXT = ConnectOptions.defaults().withSecurity(ClientSecurity.plaintext());
    /** The figures' prefix for the plaintext host node processes, measured again beside the secured ones. */
    static final String PLAIN = "plaintext";
    /** The figures' prefix for host node processes with mutual TLS. */
    static final String MTLS = "mTLS";
    /** The figures' prefix for the nodes of a running testbed given to the bench. */
    public static final String TESTBED = "testbed";
    /** The message a ring hop carries, as the ring example's default. */
    static final int RING_MESSAGE = 8192;
    static final int[] BANDWIDTH_SIZES = {4096, 65536, 1 << 20};
    static final int LATENCY_SIZE = 64;
    /** UCX's and MPI's small message: their latency is quoted at 8 bytes. */
    static final int MIDDLEWARE_SIZE = 8;
    /** The message rate's message: perftest's and the raw gRPC stream's 64-byte messages. */
    static final int RATE_SIZE = 64;
    /** Requests perftest posts per ibv_post_send when it measures the message rate ({@code -l}). */
    static final int POST_LIST = 16;
    /** MPI's large message: past UCX's rendezvous threshold, as bandwidth. */
    static final int MPI_LARGE_SIZE = 256 * 1024;

    /**
     * How long each measurement runs. {@code nodeWarmupSeconds} of traffic go through each pair of node
     * processes, then an unrecorded round 0, before the first round: on a 2-core machine their JIT
     * compilers keep a core busy for the first 30-40 s of traffic, and again whenever a path runs for
     * the first time, which no short per-figure warm-up can hide.
     */
    public record Budget(double bandwidthSeconds, double nodeWarmupSeconds, double warmupSeconds, int latencyIterations, int latencyWarmup) {
        public static Budget full() {
            return new Budget(3, 20, 1, 3000, 1000);
        }

        public static Budget quick() {
            return new Budget(0.5, 0.5, 0.2, 200, 50);
        }
    }

    private final Budget budget;
    private final PrintWriter log;
    private final Path logDirectory;
    private final Ucx ucx;
    /** Unmodified perftest through the verbs library, beside the SDK's figures (absent: not measured). */
    private VerbsPerftest verbs;
    private Middleware middleware = Middleware.find();
    /** The {@code pagewire} command's main class, which the node processes run. */
    private final Class<?> command;
    /** Every figure's value, one per round, in the order they were first measured. */
    public final Map<String, List<Double>> figures = new LinkedHashMap<>();
    /** Where one message's time went ({@link HopRun}), once, after the rounds; null when not measured. */
    public HopRun.Found breakdown;
    /** The round being measured; 0 while a pass only warms the nodes up, which records nothing. */
    private int round;
    /** Every round trip behind the write round-trip figures, for {@link #writeRoundTrips}. */
    private final List<RoundTrips> roundTrips = new ArrayList<>();

    /** The round trips one figure took in one round. */
    private record RoundTrips(String figure, int round, LatencySamples samples) {
    }

    /**
     * Two nodes measured as a configuration users run, under a figure prefix: their addresses (the
     * requester's first) and how the bench's applications and probes reach them.
     */
    public record SecuredPair(String label, String requester, String responder, ClientSecurity security, List<String> containers) {
        public SecuredPair(String label, String requester, String responder, ClientSecurity security) {
            this(label, requester, responder, security, List.of());
        }

        /** Where verbs programs run against the requester and the responder: on this host, or in the nodes' containers. */
        VerbsPerftest.Place place(int side) {
            return containers.isEmpty() ? VerbsPerftest.Place.host(side == 0 ? requester : responder)
                    : VerbsPerftest.Place.inContainer(containers.get(side));
        }
    }

    /** Node settings ({@code --set}) for every node process the bench starts; empty for the defaults. */
    private final Map<String, String> nodeSettings;
    /** A running testbed's two nodes to measure beside the host processes, or null. */
    private final SecuredPair testbed;

    public Bench(Class<?> command, Budget budget, PrintWriter log, Path logDirectory, Ucx ucx) {
        this(command, budget, log, logDirectory, ucx, Map.of(), null);
    }

    public Bench(Class<?> command, Budget budget, PrintWriter log, Path logDirectory, Ucx ucx, Map<String, String> nodeSettings,
            SecuredPair testbed) {
        this.command = command;
        this.budget = budget;
        this.log = log;
        this.logDirectory = logDirectory;
        this.ucx = ucx;
        this.verbs = VerbsPerftest.find();
        this.nodeSettings = Map.copyOf(nodeSettings);
        this.testbed = testbed;
    }

    /** Measures verbs programs with {@code value} (absent: not at all) instead of what {@link VerbsPerftest#find} found. */
    public Bench verbs(VerbsPerftest value) {
        this.verbs = value;
        return this;
    }

    private Map<String, String> settings(Map<String, String> own) {
        Map<String, String> all = new LinkedHashMap<>(nodeSettings);
        all.putAll(own);
        return all;
    }

    /**
     * Runs every round against a default pair and a latency-mode pair of plaintext node processes, a
     * pair with mutual TLS, the testbed's nodes when given, and an embedded pair.
     */
    public void run(int rounds) throws Exception {
        Path certificates = TestbedCertificates.temporary(List.of("node-1", "node-2"), "app");
        try (NodeProcesses pair = new NodeProcesses(command, "default", settings(Map.of()), logDirectory, null);
                NodeProcesses spinning = new NodeProcesses(command, "busy-poll", settings(Map.of("pagewire.node.busyPollNs", "50us")),
                        logDirectory, null);
                NodeProcesses secured = new NodeProcesses(command, "mtls", settings(Map.of()), logDirectory, certificates)) {
            // The configurations users run, the plaintext pair again first: each is compared with its neighbour in time.
            List<SecuredPair> configurations = new ArrayList<>(List.of(new SecuredPair(PLAIN, pair.requester(), pair.responder(), pair.security()),
                    new SecuredPair(MTLS, secured.requester(), secured.responder(), secured.security())));
            if (testbed != null) {
                configurations.add(testbed);
            }
            List<SecuredPair> warmed = new ArrayList<>(configurations);
            warmed.add(1, new SecuredPair("busy-poll", spinning.requester(), spinning.responder(), spinning.security()));
            for (SecuredPair nodes : warmed) {
                log.printf("# warming up the %s nodes (%.0f s of 4 KiB writes)%n", nodes.label(), budget.nodeWarmupSeconds());
                log.flush();
                ConnectOptions options = ConnectOptions.defaults().withSecurity(nodes.security());
                try (Pagewire a = Pagewire.connect(nodes.requester(), options); Pagewire b = Pagewire.connect(nodes.responder(), options);
                        Perftest perftest = new Perftest(a, b, RegistrationMode.PINNED, false)) {
                    perftest.bandwidth(Perftest.Test.WRITE_BW, 4096, Long.MAX_VALUE, (long) (budget.nodeWarmupSeconds() * 1e9), 0, 1,
                            128, done -> { });
                }
            }
            // Each size, mode, wait and the raw stream bring their own code paths, which C2 compiles (and
            // recompiles as type profiles change) the first times they run, in the nodes and here: a
            // round 0 runs every one of them unrecorded, so that no round measures a compiler thread
            // taking one of the two cores (it made busy-polling's p99 milliseconds).
            log.printf("# round 0: every path once, not recorded (JIT warm-up)%n");
            log.flush();
            bandwidth(pair, budget.warmupSeconds());
            latency(pair, spinning);
            modes(pair);
            memory(pair);
            secured(configurations, budget.warmupSeconds());
            middleware(pair);
            for (round = 1; round <= rounds; round++) {
                log.printf("# round %d of %d%n", round, rounds);
                log.flush();
                double warmup = budget.warmupSeconds();
                bandwidth(pair, warmup);
                latency(pair, spinning);
                modes(pair);
                memory(pair);
                secured(configurations, warmup);
                middleware(pair);
                embedded();
                if (ucx.available()) {
                    ucx();
                }
            }
        } finally {
            TestbedCertificates.deleteDirectory(certificates);
        }
        // Its own pair: the traces would take in every other figure's traffic, and their marks are not free.
        int iterations = budget.latencyIterations() * 5;
        breakdown = HopRun.run(command, settings(Map.of()), logDirectory, iterations, iterations, log);
    }

    /**
     * The configurations users run, each against its own link and beside the plaintext pair, size by
     * size (plaintext, then each secured pair, so that drift falls on all alike): write_bw with the raw
     * gRPC stream between the same two nodes, write round trips with the raw ping-pong, and the ring
     * example's hop. The host pair with mutual TLS is also measured as a remote application (no rings),
     * which is how an application on the host reaches nodes in containers.
     */
    private void secured(List<SecuredPair> pairs, double warmup) throws Exception {
        for (int size : BANDWIDTH_SIZES) {
            for (SecuredPair nodes : pairs) {
                securedBandwidth(nodes, size, warmup, true);
            }
        }
        for (SecuredPair nodes : pairs) {
            securedLatency(nodes, true);
        }
        SecuredPair mtls = pairs.get(1);
        securedBandwidth(mtls, 65536, warmup, false);
        securedLatency(mtls, false);
        if (verbs.available()) {
            for (SecuredPair nodes : pairs.subList(1, pairs.size())) {
                if (!nodes.label().equals(TESTBED) || !nodes.containers().isEmpty()) {
                    securedVerbs(nodes, warmup);
                }
            }
        }
        for (SecuredPair nodes : pairs) {
            record("ring hop 8 KiB " + nodes.label() + " us", ringHop(nodes, true));
        }
        record("ring hop 8 KiB " + mtls.label() + ", remote application us", ringHop(mtls, false));
    }

    /**
     * Debian's ib_write_bw (64 KiB) and ib_write_lat (64 B) through the verbs library between the pair's
     * nodes: on this host for host processes, inside the two node containers for a testbed given
     * with its containers (what a user of the compose testbed runs).
     */
    private void securedVerbs(SecuredPair nodes, double warmup) {
        Double mb = verbs.writeBandwidthMbPerSec(nodes.place(0), nodes.place(1), VERBS_BANDWIDTH_SIZE, warmup + budget.bandwidthSeconds());
        if (mb != null) {
            record(nodes.label() + " verbs ib_write_bw " + label(VERBS_BANDWIDTH_SIZE) + " MB/s", mb);
        } else {
            log.printf("# %s verbs ib_write_bw failed; not recorded:%n%s%n", nodes.label(), verbs.failure);
        }
        VerbsPerftest.Latency latency = verbs.writeLatency(nodes.place(0), nodes.place(1), LATENCY_SIZE, budget.latencyIterations());
        if (latency != null) {
            record(nodes.label() + " verbs ib_write_lat RTT 64 B p50 us", latency.typicalUs() * 2);
            record(nodes.label() + " verbs ib_write_lat RTT 64 B p99 us", latency.p99Us() * 2);
        } else {
            log.printf("# %s verbs ib_write_lat failed; not recorded:%n%s%n", nodes.label(), verbs.failure);
        }
    }

    /**
     * What HPC and AI software runs on, between the default pair's nodes, beside the same over TCP loopback:
     * perftest's ib_send_lat and ib_write_lat (64 B), UCX's tag_lat (8 B) over rc_v, ud_v and tcp, and
     * OpenMPI's ping-pong at 8 B and 256 KiB over pml ucx (ud_v) and over btl tcp. Round trips are recorded
     * (twice the one-way figures the programs print) so that they divide by the gRPC ping-pong's.
     */
    private void middleware(NodeProcesses pair) {
        if (!verbs.available()) {
            return;
        }
        VerbsPerftest.Place requester = VerbsPerftest.Place.host(pair.requester());
        VerbsPerftest.Place responder = VerbsPerftest.Place.host(pair.responder());
        List<String> options = List.of("-s", String.valueOf(LATENCY_SIZE), "-n", String.valueOf(budget.latencyIterations() * 5));
        for (String program : new String[] {"ib_send_lat", "ib_write_lat"}) {
            VerbsPerftest.LatencyRow row = verbs.latency(program, requester, responder, options, Map.of());
            if (row == null) {
                log.printf("# verbs %s failed; not recorded:%n%s%n", program, verbs.failure);
                continue;
            }
            record("verbs " + program + " RTT 64 B default p50 us", row.typicalUs() * 2);
            record("verbs " + program + " RTT 64 B default p99 us", row.p99Us() * 2);
        }
        middlewareThroughput(pair, requester, responder);
        int iterations = budget.latencyIterations() * 7;
        for (String transport : new String[] {"rc_v", "ud_v", "tcp"}) {
            Double us = middleware.ucxTagLatencyUs(transport, pair.requester(), pair.responder(), MIDDLEWARE_SIZE, iterations, iterations / 10);
            if (us == null) {
                log.printf("# ucx tag_lat %s failed; not recorded:%n%s%n", transport, middleware.failure());
                continue;
            }
            record("ucx tag_lat " + transport + " RTT 8 B p50 us", us * 2);
        }
        for (boolean tcp : new boolean[] {false, true}) {
            String over = tcp ? "mpi tcp" : "mpi pml ucx ud_v";
            Double small = middleware.mpiPingPongUs("ud_v", tcp ? null : pair.requester(), tcp ? null : pair.responder(), MIDDLEWARE_SIZE, iterations);
            if (small != null) {
                record(over + " RTT 8 B us", small * 2);
            } else {
                log.printf("# %s 8 B failed; not recorded:%n%s%n", over, middleware.failure());
            }
            Double large = middleware.mpiPingPongUs("ud_v", tcp ? null : pair.requester(), tcp ? null : pair.responder(), MPI_LARGE_SIZE,
                    Math.max(20, iterations / 40));
            if (large != null) {
                record(over + " " + label(MPI_LARGE_SIZE) + " MB/s", MPI_LARGE_SIZE / large / (1 << 20) * 1e6);
            } else {
                log.printf("# %s %s failed; not recorded:%n%s%n", over, label(MPI_LARGE_SIZE), middleware.failure());
            }
        }
    }

    /**
     * Issue 54's throughput rows, between the default pair's nodes: perftest's message rate at 64 B (post lists of
     * {@link #POST_LIST}, as perftest's {@code -l}) beside the rate at which the raw gRPC stream between the same
     * node processes carries 64-byte messages; ib_send_bw at 64 KiB beside ib_write_bw's; UCX's tag_bw at 64 KiB
     * over {@code rc_v} and over TCP loopback.
     */
    private void middlewareThroughput(NodeProcesses pair, VerbsPerftest.Place requester, VerbsPerftest.Place responder) {
        String seconds = String.valueOf(Math.max(1, Math.round(budget.warmupSeconds() + budget.bandwidthSeconds())));
        VerbsPerftest.Bandwidth rate = verbs.bandwidth("ib_write_bw", requester, responder, List.of("-s", String.valueOf(RATE_SIZE), "-D",
                seconds, "-l", String.valueOf(POST_LIST)));
        if (rate != null) {
            record("verbs ib_write_bw " + RATE_SIZE + " B Mpps", rate.mpps());
        } else {
            log.printf("# verbs ib_write_bw %d B failed; not recorded:%n%s%n", RATE_SIZE, verbs.failure);
        }
        try (NodeProbe probeA = new NodeProbe(pair.requester(), ClientSecurity.plaintext());
                NodeProbe probeB = new NodeProbe(pair.responder(), ClientSecurity.plaintext())) {
            Perftest.BandwidthRow link = probeA.linkBandwidth(probeB.describe().getNodeId(), RATE_SIZE, Long.MAX_VALUE,
                    (long) (budget.warmupSeconds() * 1e9), (long) (budget.bandwidthSeconds() * 1e9), ProcessCpu::nanos);
            record("grpc stream " + RATE_SIZE + " B Mpps", link.messageRateMpps());
        }
        String size = String.valueOf(VERBS_BANDWIDTH_SIZE);
        VerbsPerftest.Bandwidth send = verbs.bandwidth("ib_send_bw", requester, responder, List.of("-s", size, "-D", seconds));
        if (send != null) {
            record("verbs ib_send_bw " + label(VERBS_BANDWIDTH_SIZE) + " MB/s", send.averageMbPerSec());
        } else {
            log.printf("# verbs ib_send_bw failed; not recorded:%n%s%n", verbs.failure);
        }
        int iterations = (int) Math.max(1000, Math.min(200_000, budget.bandwidthSeconds() * 300e6 / VERBS_BANDWIDTH_SIZE));
        for (String transport : new String[] {"rc_v", "tcp"}) {
            Double mb = middleware.ucxTagBandwidthMbPerSec(transport, pair.requester(), pair.responder(), VERBS_BANDWIDTH_SIZE, iterations);
            if (mb != null) {
                record("ucx tag_bw " + transport + " " + label(VERBS_BANDWIDTH_SIZE) + " MB/s", mb);
            } else {
                log.printf("# ucx tag_bw %s failed; not recorded:%n%s%n", transport, middleware.failure());
            }
        }
    }

    /** Connections to a secured pair: with rings where the node offers them, or as a remote application. */
    private static ConnectOptions options(SecuredPair nodes, boolean sharedMemory) {
        return ConnectOptions.defaults().withSecurity(nodes.security()).withSharedMemory(sharedMemory);
    }

    private static String remote(boolean sharedMemory) {
        return sharedMemory ? "" : ", remote application";
    }

    private void securedBandwidth(SecuredPair nodes, int size, double warmup, boolean sharedMemory) throws Exception {
        String kib = label(size);
        try (Pagewire a = Pagewire.connect(nodes.requester(), options(nodes, sharedMemory));
                Pagewire b = Pagewire.connect(nodes.responder(), options(nodes, true));
                NodeProbe probeA = new NodeProbe(nodes.requester(), nodes.security());
                NodeProbe probeB = new NodeProbe(nodes.responder(), nodes.security())) {
            LongSupplier cpu = () -> ProcessCpu.nanos() + probeA.cpuNs() + probeB.cpuNs();
            Perftest.BandwidthRow pinned = bandwidth(a, b, RegistrationMode.PINNED, size, warmup, cpu);
            record(nodes.label() + " write_bw " + kib + " PINNED" + remote(sharedMemory) + " MB/s", pinned.averageMbPerSec());
            if (sharedMemory) {
                record(nodes.label() + " write_bw " + kib + " PINNED CPU s/GB", pinned.cpuSecondsPerGb());
                Perftest.BandwidthRow link = probeA.linkBandwidth(probeB.describe().getNodeId(), size, Long.MAX_VALUE, (long) (warmup * 1e9),
                        (long) (budget.bandwidthSeconds() * 1e9), cpu);
                record(nodes.label() + " grpc stream " + kib + " MB/s", link.averageMbPerSec());
                record(nodes.label() + " grpc stream " + kib + " CPU s/GB", link.cpuSecondsPerGb());
            }
        }
    }

    private void securedLatency(SecuredPair nodes, boolean sharedMemory) throws Exception {
        try (Pagewire a = Pagewire.connect(nodes.requester(), options(nodes, sharedMemory));
                Pagewire b = Pagewire.connect(nodes.responder(), options(nodes, sharedMemory));
                NodeProbe probeA = new NodeProbe(nodes.requester(), nodes.security());
                NodeProbe probeB = new NodeProbe(nodes.responder(), nodes.security())) {
            Perftest.LatencyRow write = latency(a, b, RegistrationMode.PINNED, Perftest.Test.WRITE_LAT, false, false);
            record(nodes.label() + " write RTT 64 B" + remote(sharedMemory) + " p50 us", write.typical() * 2);
            if (sharedMemory) {
                record(nodes.label() + " write RTT 64 B p99 us", write.p99() * 2);
                Perftest.LatencyRow link = probeA.linkPingPong(probeB.describe().getNodeId(), LATENCY_SIZE, budget.latencyIterations(),
                        budget.latencyWarmup(), false);
                record(nodes.label() + " grpc ping-pong RTT 64 B p50 us", link.typical());
            }
        }
    }

    /**
     * The ring example ({@link NotifyRing}) between two applications on the pair's two nodes, its
     * median time per hop in microseconds: store the message, write it with a notification into the
     * next member's inbox, wait for that member's counter, load and check what landed.
     */
    private double ringHop(SecuredPair nodes, boolean sharedMemory) {
        int rounds = Math.max(20, budget.latencyIterations() / 5);
        return NotifyRing.run(List.of(nodes.requester(), nodes.responder()), rounds, RING_MESSAGE, RegistrationMode.PINNED,
                options(nodes, sharedMemory)).medianHopMicros();
    }

    private void bandwidth(NodeProcesses pair, double warmup) throws Exception {
        // Plaintext node processes: the emulator over a plain link.
        try (Pagewire a = Pagewire.connect(pair.requester(), PLAINTEXT); Pagewire b = Pagewire.connect(pair.responder(), PLAINTEXT);
                Pagewire remoteA = Pagewire.connect(pair.requester(), PLAINTEXT.withSharedMemory(false));
                NodeProbe probeA = new NodeProbe(pair.requester(), ClientSecurity.plaintext());
                NodeProbe probeB = new NodeProbe(pair.responder(), ClientSecurity.plaintext())) {
            String peer = probeB.describe().getNodeId();
            LongSupplier cpu = () -> ProcessCpu.nanos() + probeA.cpuNs() + probeB.cpuNs();
            for (int size : BANDWIDTH_SIZES) {
                String kib = label(size);
                // A B A B: Pagewire, the link, Pagewire in the other mode.
                Perftest.BandwidthRow pinned = bandwidth(a, b, RegistrationMode.PINNED, size, warmup, cpu);
                record("write_bw " + kib + " PINNED MB/s", pinned.averageMbPerSec());
                record("write_bw " + kib + " PINNED CPU s/GB", pinned.cpuSecondsPerGb());
                Perftest.BandwidthRow link = probeA.linkBandwidth(peer, size, Long.MAX_VALUE, (long) (warmup * 1e9),
                        (long) (budget.bandwidthSeconds() * 1e9), cpu);
                record("grpc stream " + kib + " MB/s", link.averageMbPerSec());
                record("grpc stream " + kib + " CPU s/GB", link.cpuSecondsPerGb());
                Perftest.BandwidthRow odp = bandwidth(a, b, RegistrationMode.ON_DEMAND, size, warmup, cpu);
                record("write_bw " + kib + " ON_DEMAND MB/s", odp.averageMbPerSec());
                record("write_bw " + kib + " ON_DEMAND CPU s/GB", odp.cpuSecondsPerGb());
                if (verbs.available()) {
                    // The same nodes and link, driven by Debian's perftest through the verbs library.
                    Double mb = verbs.writeBandwidthMbPerSec(pair.requester(), pair.responder(), size, warmup + budget.bandwidthSeconds());
                    if (mb != null) {
                        record("verbs ib_write_bw " + kib + " MB/s", mb);
                    } else {
                        log.printf("# verbs ib_write_bw %s failed; not recorded:%n%s%n", kib, verbs.failure);
                    }
                }
            }
            // perftest's tx depth (128) keeps 512 KiB of 4 KiB writes in flight, where the raw stream
            // may have the lanes' whole flow-control window (4 MiB) on the way: the same again with
            // as many bytes in flight as the link allows it, to tell the pipe's depth from its cost.
            int linkDepth = FabricConfiguration.FLOW_CONTROL_WINDOW.defaultValue() / 4096;
            Perftest.BandwidthRow deep = bandwidth(a, b, RegistrationMode.PINNED, 4096, warmup, cpu, linkDepth);
            record("write_bw 4 KiB PINNED, link-window depth MB/s", deep.averageMbPerSec());
            record("write_bw 4 KiB PINNED, link-window depth CPU s/GB", deep.cpuSecondsPerGb());
            Perftest.BandwidthRow remote = bandwidth(remoteA, b, RegistrationMode.PINNED, 4096, warmup, cpu);
            record("write_bw 4 KiB PINNED, remote application (gRPC verbs) MB/s", remote.averageMbPerSec());
        }
    }

    private Perftest.BandwidthRow bandwidth(Pagewire a, Pagewire b, RegistrationMode mode, int size, double warmup,
            LongSupplier cpu) {
        return bandwidth(a, b, mode, size, warmup, cpu, TX_DEPTH);
    }

    private Perftest.BandwidthRow bandwidth(Pagewire a, Pagewire b, RegistrationMode mode, int size, double warmup,
            LongSupplier cpu, int txDepth) {
        try (Perftest perftest = new Perftest(a, b, mode, false)) {
            perftest.cpuClock(cpu);
            return perftest.bandwidth(Perftest.Test.WRITE_BW, size, Long.MAX_VALUE, (long) (budget.bandwidthSeconds() * 1e9),
                    (long) (warmup * 1e9), 1, txDepth, done -> { });
        }
    }

    /** The size perftest's ib_write_bw is measured at through the verbs library. */
    static final int VERBS_BANDWIDTH_SIZE = 65536;

    /** Requests in flight per queue pair, perftest's default for its bandwidth tests. */
    static final int TX_DEPTH = 128;

    private void latency(NodeProcesses pair, NodeProcesses spinning) throws Exception {
        for (boolean busy : new boolean[] {false, true}) {
            NodeProcesses nodes = busy ? spinning : pair;
            String how = busy ? "busy-poll" : "default";
            ConnectOptions options = PLAINTEXT.withBusyPoll(busy);
            try (Pagewire a = Pagewire.connect(nodes.requester(), options); Pagewire b = Pagewire.connect(nodes.responder(), options);
                    NodeProbe probeA = new NodeProbe(nodes.requester(), ClientSecurity.plaintext());
                    NodeProbe probeB = new NodeProbe(nodes.responder(), ClientSecurity.plaintext())) {
                LatencySamples samples = new LatencySamples();
                Perftest.LatencyRow write = latency(a, b, RegistrationMode.PINNED, Perftest.Test.WRITE_LAT, busy, false, samples);
                record("write RTT 64 B " + how + " p50 us", write.typical() * 2);
                record("write RTT 64 B " + how + " p99 us", write.p99() * 2);
                if (recording()) {
                    roundTrips.add(new RoundTrips("write RTT 64 B " + how, round, samples));
                }
                Perftest.LatencyRow link = probeA.linkPingPong(probeB.describe().getNodeId(), LATENCY_SIZE, budget.latencyIterations(),
                        budget.latencyWarmup(), false);
                record("grpc ping-pong RTT 64 B " + how + " p50 us", link.typical());
                record("grpc ping-pong RTT 64 B " + how + " p99 us", link.p99());
                if (busy && verbs.available()) {
                    Double oneWay = verbs.writeLatencyTypicalUs(nodes.requester(), nodes.responder(), LATENCY_SIZE, budget.latencyIterations());
                    if (oneWay != null) {
                        // perftest reports half a round trip.
                        record("verbs ib_write_lat RTT 64 B " + how + " p50 us", oneWay * 2);
                    } else {
                        log.printf("# verbs ib_write_lat failed; not recorded:%n%s%n", verbs.failure);
                    }
                }
                Perftest.LatencyRow read = latency(a, b, RegistrationMode.PINNED, Perftest.Test.READ_LAT, busy, false);
                record("read RTT 64 B " + how + " p50 us", read.typical());
            }
            if (!busy) {
                try (Pagewire remoteA = Pagewire.connect(nodes.requester(), options.withSharedMemory(false));
                        Pagewire remoteB = Pagewire.connect(nodes.responder(), options.withSharedMemory(false))) {
                    Perftest.LatencyRow write = latency(remoteA, remoteB, RegistrationMode.PINNED, Perftest.Test.WRITE_LAT, false, false);
                    record("write RTT 64 B default, remote application (gRPC verbs) p50 us", write.typical() * 2);
                }
            }
        }
    }

    /**
     * Warm translations in each mode against PINNED, and what a minor receive fault adds: one
     * ping-pong whose pings take turns between the variants (PINNED, PIN_ON_MISS, SHADOW, ON_DEMAND,
     * then PIN_ON_MISS onto a page never touched), so that each difference is measured in the same
     * moments; apart, the machine's drift between runs (tens of microseconds) is larger than what is
     * measured.
     */
    private void modes(NodeProcesses pair) throws Exception {
        try (Pagewire a = Pagewire.connect(pair.requester(), PLAINTEXT); Pagewire b = Pagewire.connect(pair.responder(), PLAINTEXT);
                Perftest perftest = new Perftest(a, b, RegistrationMode.PINNED, false)) {
            List<Perftest.Variant> variants = new ArrayList<>();
            for (RegistrationMode mode : RegistrationMode.values()) {
                variants.add(new Perftest.Variant(mode, false));
            }
            variants.add(new Perftest.Variant(RegistrationMode.PIN_ON_MISS, true));
            List<Perftest.LatencyRow> rows = perftest.interleavedWriteLatency(variants, LATENCY_SIZE, budget.latencyIterations(),
                    budget.latencyWarmup());
            for (int i = 0; i < variants.size(); i++) {
                Perftest.Variant v = variants.get(i);
                record(v.freshPages() ? "write RTT 64 B " + v.mode() + ", minor receive fault each ping p50 us"
                        : "write RTT 64 B warm " + v.mode() + " p50 us", rows.get(i).typical() * 2);
            }
        }
    }

    /**
     * An application's own memory: a 64-byte store and load on the co-located path (the node's memory
     * mapped, pages reached directly) beside the same two as gRPC calls, and 1 MiB stores beside a
     * plain copy of 1 MiB into off-heap memory in this process, each pair back to back.
     */
    private void memory(NodeProcesses pair) {
        try (Pagewire mapped = Pagewire.connect(pair.requester(), PLAINTEXT);
                Pagewire calls = Pagewire.connect(pair.requester(), PLAINTEXT.withSharedMemory(false))) {
            Endpoint cpu = mapped.openEndpoint("bench-cpu");
            Endpoint remote = calls.openEndpoint("bench-calls");
            if (!cpu.sharesMemory()) {
                log.printf("# the node's memory is not mapped here: no co-located memory figures%n");
                return;
            }
            int iterations = budget.latencyIterations() * 10;
            record("store+load 64 B co-located p50 us", storeLoadMicros(cpu, iterations));
            record("store+load 64 B gRPC calls p50 us", storeLoadMicros(remote, budget.latencyIterations()));
            byte[] mebibyte = new byte[1 << 20];
            new java.util.Random(1).nextBytes(mebibyte);
            long address = cpu.allocate(mebibyte.length);
            cpu.store(address, mebibyte); // first touch: faults, not the steady state
            ByteBuffer offHeap = ByteBuffer.allocateDirect(mebibyte.length);
            int copies = Math.max(20, budget.latencyIterations() / 10);
            for (int pass = 0; pass < 2; pass++) { // the first pass warms both loops up
                long start = System.nanoTime();
                for (int i = 0; i < copies; i++) {
                    cpu.store(address, mebibyte);
                }
                long stored = System.nanoTime() - start;
                start = System.nanoTime();
                for (int i = 0; i < copies; i++) {
                    offHeap.clear();
                    offHeap.put(mebibyte);
                }
                long copied = System.nanoTime() - start;
                if (pass == 1) {
                    record("store 1 MiB co-located MB/s", copies * (double) mebibyte.length / (1 << 20) / (stored / 1e9));
                    record("plain copy 1 MiB MB/s", copies * (double) mebibyte.length / (1 << 20) / (copied / 1e9));
                }
            }
            cpu.free(address);
        }
    }

    /** The median time of a 64-byte store followed by a load of the same bytes, in microseconds, after a tenth as many unrecorded. */
    private static double storeLoadMicros(Endpoint endpoint, int iterations) {
        long address = endpoint.allocate(4096);
        byte[] data = new byte[64];
        Histogram histogram = new Histogram(3_600_000_000_000L, 3);
        for (int i = -iterations / 10; i < iterations; i++) {
            data[0] = (byte) i;
            long start = System.nanoTime();
            endpoint.store(address, data);
            byte[] back = endpoint.load(address, 64);
            long elapsed = System.nanoTime() - start;
            if (back[0] != data[0]) {
                throw new IllegalStateException("a load did not return the store before it");
            }
            if (i >= 0) {
                histogram.recordValue(elapsed);
            }
        }
        endpoint.free(address);
        return histogram.getValueAtPercentile(50) / 1000.0;
    }

    private void embedded() throws Exception {
        for (boolean busy : new boolean[] {false, true}) {
            String how = busy ? "busy-poll" : "default";
            try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> {
                c.security().plaintext();
                c.busyPollNs(busy ? Perftest.BUSY_POLL_NS : 0);
            });
                    Pagewire a = Pagewire.connect(cluster.node(1).target(), PLAINTEXT.withBusyPoll(busy));
                    Pagewire b = Pagewire.connect(cluster.node(2).target(), PLAINTEXT.withBusyPoll(busy))) {
                Perftest.LatencyRow write = latency(a, b, RegistrationMode.PINNED, Perftest.Test.WRITE_LAT, busy, false);
                record("write RTT 64 B embedded " + how + " p50 us", write.typical() * 2);
            }
        }
    }

    private Perftest.LatencyRow latency(Pagewire a, Pagewire b, RegistrationMode mode, Perftest.Test test, boolean busy, boolean fresh)
            throws Exception {
        return latency(a, b, mode, test, busy, fresh, null);
    }

    /** As above; the measured round trips (not the warm-up's) also go to {@code samples} unless it is null. */
    private Perftest.LatencyRow latency(Pagewire a, Pagewire b, RegistrationMode mode, Perftest.Test test, boolean busy, boolean fresh,
            LatencySamples samples) throws Exception {
        try (Perftest perftest = new Perftest(a, b, mode, busy)) {
            // Warm-up ping-pongs until this JVM's compilers are quiet: a round of a few thousand round
            // trips is over in well under a second, and a compiler thread still at work on the path
            // takes one of two cores from the pollers (measured: busy-polling p99 2.4-2.7 ms over
            // 3,000 pings of a fresh process, 0.15 ms over 100,000).
            CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
            boolean watched = jit != null && jit.isCompilationTimeMonitoringSupported();
            for (int batch = 0; watched && batch < MAX_WARMUP_BATCHES; batch++) {
                long compiledMs = jit.getTotalCompilationTime();
                perftest.latency(test, LATENCY_SIZE, budget.latencyWarmup(), 0, fresh, done -> { });
                if (jit.getTotalCompilationTime() == compiledMs) {
                    break;
                }
            }
            perftest.recordSamples(samples);
            return perftest.latency(test, LATENCY_SIZE, budget.latencyIterations(), budget.latencyWarmup(), fresh, done -> { });
        }
    }

    /**
     * Writes every round trip behind the write round-trip figures as CSV ({@code figure,round,} then
     * {@link LatencySamples#HEADER}'s columns), so that a round whose p99 stands out can be taken apart
     * afterwards: clustered slow round trips point at one event (a collection, a compiler), scattered
     * ones at the scheduler.
     */
    public void writeRoundTrips(Writer out) throws IOException {
        out.write("figure,round," + LatencySamples.HEADER + "\n");
        for (RoundTrips r : roundTrips) {
            r.samples().writeRows(out, r.figure() + "," + r.round() + ",");
        }
        out.flush();
    }

    /** At most this many warm-up batches of a latency figure wait for the compilers to be quiet. */
    private static final int MAX_WARMUP_BATCHES = 20;

    private void ucx() {
        for (int size : BANDWIDTH_SIZES) {
            Double mb = ucx.putBandwidthMbPerSec(size, budget);
            if (mb != null) {
                record("ucx ucp_put_bw " + label(size) + " MB/s", mb);
            }
        }
        Double lat = ucx.putLatencyUs(LATENCY_SIZE, budget);
        if (lat != null) {
            // ucx_perftest reports half a round trip, as perftest does.
            record("ucx ucp_put_lat RTT 64 B p50 us", lat * 2);
        }
    }

    /** Whether what is measured now counts (round 0 only warms up). */
    private boolean recording() {
        return round > 0;
    }

    private void record(String name, double value) {
        if (!recording()) {
            return;
        }
        figures.computeIfAbsent(name, n -> new ArrayList<>()).add(value);
        log.printf("  %-72s %12.2f%n", name, value);
        log.flush();
    }

    static String label(int size) {
        return size >= 1 << 20 ? (size >> 20) + " MiB" : (size >> 10) + " KiB";
    }
}
