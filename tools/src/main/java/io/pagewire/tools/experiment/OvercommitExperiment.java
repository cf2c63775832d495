package io.pagewire.tools.experiment;

import io.pagewire.client.Advice;
import io.pagewire.client.PagewireException;
import io.pagewire.kernel.PinLimitExceededException;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.tools.perf.ExternalPrograms;
import io.pagewire.tools.perf.VerbsPerftest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * {@code overcommit} (NIC on-demand paging): several applications on one node each register a
 * receive region, together more than the node lets be pinned, and each has its peer write the whole
 * region a few times over. With PINNED, registration pins: the applications whose regions do not
 * fit are refused and run after the others have finished and deregistered. With ON_DEMAND nothing
 * is pinned: all register at once, prefetch their regions (ibv_advise_mr) and run together. The
 * job's time is from the first registration to the last write's completion. It runs on two nodes it
 * starts (with a small pin limit, over a bare link and one with added delay), the applications
 * written with the SDK and then as stock programs (ib_write_bw pairs through the verbs library, which
 * register their own buffers, --odp for ON_DEMAND, and are started again when refused), or against two
 * nodes of a running cluster, through the SDK, sized from the receiving node's own limits.
 */
public final class OvercommitExperiment implements Experiment {
    private static final int PAGE = 4096;
    private static final int MESSAGE = 64 << 10;

    /** How big a run is: applications, each one's region, the node's pin limit and memory, passes over each region, writes in flight. */
    record Shape(int applications, long regionBytes, long pinLimitBytes, long physicalMemoryBytes, int passes, int depth) {
    }

    static final Shape DEFAULT = new Shape(4, 16L << 20, 40L << 20, 128L << 20, 8, 2);
    static final Shape REDUCED = new Shape(4, 4L << 20, 10L << 20, 32L << 20, 8, 2);
    /** Rounds of both modes, in alternating order; the medians are reported. */
    private static final int ROUNDS = 3;
    /**
     * The link's added delay each way: none (loopback: the applications are CPU-bound on a small
     * machine), and 200 us (each application's two writes in flight leave the link and the CPU idle
     * most of the time, as a latency-bound application does on a real network).
     */
    static final long[] LINK_DELAYS_NS = {0, 200_000};
    private static final RegistrationMode[] MODES = {RegistrationMode.PINNED, RegistrationMode.ON_DEMAND};
    /** The link column's entry for a running cluster's link, whose delay is whatever it is. */
    static final String CLUSTER_LINK = "the cluster's";
    /** The workload column's entry for applications written with the SDK's calls. */
    static final String SDK_WORKLOAD = "SDK writes";
    /** perftest's program, the job's applications as people run them. */
    static final String WRITE_BW = "ib_write_bw";

    /**
     * The job as stock programs run it: each application a pair of Debian's ib_write_bw through the
     * verbs library ({@code -s}, {@code -t}, {@code -n}: the SDK job's 64 KiB writes, two in flight),
     * the program registering its own buffer on each node, PINNED (a plain ibv_reg_mr) or ON_DEMAND
     * ({@code --odp}). Its buffer is twice its message and a page (132 KiB at 64 KiB; seen in the nodes'
     * pinned bytes), and each node's pin limit holds two and a half of them.
     */
    record PerftestShape(int applications, int messageBytes, int depth, int iterations) {
        long bufferBytes() {
            return 2L * messageBytes + PAGE;
        }

        long pinLimitBytes() {
            return (bufferBytes() * 5 / 2 + PAGE - 1) / PAGE * PAGE;
        }

        List<String> options(RegistrationMode mode) {
            List<String> options = new ArrayList<>(List.of("-s", String.valueOf(messageBytes), "-t", String.valueOf(depth), "-n",
                    String.valueOf(iterations)));
            if (mode == RegistrationMode.ON_DEMAND) {
                options.add("--odp");
            }
            return options;
        }
    }

    /** Writes enough that each program's transfer outlasts its start (about a second: two processes, connection set-up). */
    static final PerftestShape PERFTEST_DEFAULT = new PerftestShape(4, MESSAGE, 2, 4096);
    static final PerftestShape PERFTEST_REDUCED = new PerftestShape(4, MESSAGE, 2, 1024);

    /** One column pair of the table: the applications' workload and the link they ran over. */
    record Setting(String workload, String link) {
        String label() {
            return workload + ", " + (link.equals(CLUSTER_LINK) ? "the cluster's link" : "link delay " + link + " us");
        }
    }

    @Override
    public String name() {
        return "overcommit";
    }

    @Override
    public String paper() {
        return "NIC on-demand paging (Lesokhin et al., ASPLOS 2017): without pinning, applications whose registered memory together exceeds "
                + "what can be pinned run at once instead of one after another, and the whole job finishes up to 1.9x sooner.";
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        if (settings.cluster() != null) {
            return runOnCluster(settings, progress);
        }
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        Map<Setting, Map<RegistrationMode, List<JobRun>>> runs = new LinkedHashMap<>();
        // An unrecorded run per mode first: the JIT compiles each mode's paths during it.
        progress.println("overcommit: warming up ...");
        progress.flush();
        for (RegistrationMode mode : MODES) {
            runEmbeddedJob(shape, mode, 0);
        }
        for (long delay : LINK_DELAYS_NS) {
            Setting setting = new Setting(SDK_WORKLOAD, String.valueOf(delay / 1000));
            runRounds(shape.applications(), setting, progress, runs, mode -> runEmbeddedJob(shape, mode, delay));
        }
        PerftestShape perftest = settings.reduced() ? PERFTEST_REDUCED : PERFTEST_DEFAULT;
        if (VerbsPerftest.library() == null || ExternalPrograms.onPath(WRITE_BW) == null) {
            progress.println("overcommit: " + WRITE_BW + " or the verbs library is not installed (verbs-c/ensure-packages.sh and the build):"
                    + " the job of stock programs is left out");
        } else {
            for (long delay : LINK_DELAYS_NS) {
                runPerftestJobs(perftest, delay, progress, runs);
            }
        }
        return result(shape.applications(), runs, "on the bare loopback link, not judged: there running together gains only what two"
                + " applications leave of this machine's 2 cores, nothing when they keep both busy as the SDK's do");
    }

    /**
     * The job of ib_write_bw pairs on two nodes started for it, {@link #ROUNDS} rounds of both modes
     * after an unrecorded one, into {@code runs}.
     */
    private static void runPerftestJobs(PerftestShape shape, long linkDelayNs, PrintWriter progress,
            Map<Setting, Map<RegistrationMode, List<JobRun>>> runs) throws Exception {
        try (VerbsNodes nodes = VerbsNodes.start(c -> {
            c.fabric().delayNs(linkDelayNs);
            // The programs run on this host in plaintext: one caller to the node, whose share must be all of it.
            c.kernel().nodePinLimitBytes(shape.pinLimitBytes()).memlockLimitBytes(shape.pinLimitBytes()).callerShare(1);
        }, WRITE_BW)) {
            for (RegistrationMode mode : MODES) {
                runPerftestJob(nodes, shape, mode);
            }
            runRounds(shape.applications(), new Setting(WRITE_BW, String.valueOf(linkDelayNs / 1000)), progress, runs,
                    mode -> runPerftestJob(nodes, shape, mode));
        }
    }

    /**
     * The job as a cluster's launcher runs stock programs: starts every waiting application's pair;
     * those the nodes refuse (their ib_write_bw could not register its buffer and exited) wait for the
     * next turn, which starts when the ones that run have finished.
     */
    private static JobRun runPerftestJob(VerbsNodes nodes, PerftestShape shape, RegistrationMode mode) throws Exception {
        List<Integer> waiting = new ArrayList<>();
        for (int i = 0; i < shape.applications(); i++) {
            waiting.add(i);
        }
        List<Integer> batches = new ArrayList<>();
        String refusal = null;
        long start = System.nanoTime();
        ExecutorService threads = Executors.newFixedThreadPool(shape.applications());
        try {
            int emptyTurns = 0;
            while (!waiting.isEmpty()) {
                Map<Integer, Future<VerbsPerftest.PairRun>> started = new LinkedHashMap<>();
                for (int app : waiting) {
                    started.put(app, threads.submit(() -> nodes.programs().writeBwRun(nodes.requesterPlace(), nodes.responderPlace(),
                            shape.options(mode))));
                }
                List<Integer> ran = new ArrayList<>();
                for (Map.Entry<Integer, Future<VerbsPerftest.PairRun>> app : started.entrySet()) {
                    VerbsPerftest.PairRun run = app.getValue().get(10, TimeUnit.MINUTES);
                    if (run.output() != null) {
                        ran.add(app.getKey());
                    } else if (refusedRegistration(run.failure())) {
                        refusal = refusal != null ? refusal : String.format(Locale.ROOT, "application %d: %s (a %d KiB pin limit)", app.getKey() + 1,
                                refusedLine(run.failure()), shape.pinLimitBytes() >> 10);
                    } else {
                        throw new IllegalStateException("overcommit: " + WRITE_BW + " of application " + (app.getKey() + 1) + " failed: "
                                + run.failure() + "\ncounters:\n" + nodes.requester().nic().counters() + "\n" + nodes.responder().nic().counters());
                    }
                }
                if (ran.isEmpty()) {
                    // The pins of a pair whose other side was refused go when the node sees its program gone: try once more.
                    if (++emptyTurns > 3) {
                        throw new IllegalStateException("overcommit: not one application's buffer can be registered: " + refusal);
                    }
                    Thread.sleep(500);
                    continue;
                }
                waiting.removeAll(ran);
                batches.add(ran.size());
            }
        } finally {
            threads.shutdownNow();
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        return new JobRun(mode, batches, refusal, seconds, (long) shape.applications() * shape.iterations() * shape.messageBytes());
    }

    /** Whether a pair failed because a node would not pin its buffer: perftest's words for a failed ibv_reg_mr. */
    static boolean refusedRegistration(String failure) {
        return failure != null && failure.contains("Couldn't allocate MR");
    }

    /** The failure's line that says why (perftest's; the library says nothing of a refused registration, as libibverbs does), for the evidence. */
    private static String refusedLine(String failure) {
        return failure.lines().filter(line -> line.contains("Couldn't allocate MR")).findFirst().orElse(failure).trim();
    }

    /**
     * The job on two nodes of a running cluster, sized from the receiving node's own limits: four
     * applications whose regions together exceed what it may still pin, and fit in its memory.
     */
    private ExperimentResult runOnCluster(ExperimentSettings settings, PrintWriter progress) throws Exception {
        try (ApplicationPair pair = ApplicationPair.open(settings)) {
            progress.printf(Locale.ROOT, "overcommit: %s%n", pair.where());
            NodeStats limits = NodeStats.read(pair.responder());
            long pinLimit = (long) limits.sum("pagewire_node_pin_limit_bytes");
            long available = pinLimit - (long) limits.sum("pagewire_pinned_memory_bytes");
            Shape shape = clusterShape(available, (long) limits.sum("pagewire_memlock_limit_bytes"),
                    pair.responder().node().physicalMemoryBytes(), settings.reduced());
            progress.printf(Locale.ROOT, "overcommit: %s may pin %d MiB more (limit %d MiB) and has %d MiB of memory: %d applications of %.1f MiB%n",
                    pair.responder().node().nodeId(), available >> 20, pinLimit >> 20, pair.responder().node().physicalMemoryBytes() >> 20,
                    shape.applications(), shape.regionBytes() / (double) (1 << 20));
            progress.flush();
            Map<Setting, Map<RegistrationMode, List<JobRun>>> runs = new LinkedHashMap<>();
            for (RegistrationMode mode : MODES) {
                runClusterJob(pair, shape, mode);
            }
            runRounds(shape.applications(), new Setting(SDK_WORKLOAD, CLUSTER_LINK), progress, runs, mode -> runClusterJob(pair, shape, mode));
            return result(shape.applications(), runs, null);
        }
    }

    /**
     * The shape of a run against a running node: four applications whose regions each fit under the
     * per-application memlock limit and within two fifths of what the node may still pin (so that
     * together they exceed it), and together fit in 90 % of its memory (so that on-demand paging runs
     * them without thrashing). A node whose pin limit is too close to its memory for both cannot be
     * overcommitted this way: PINNED then runs them all at once, and the first claim says so.
     */
    static Shape clusterShape(long pinAvailable, long memlockLimit, long physicalMemory, boolean reduced) {
        int applications = 4;
        long region = Math.min(Math.min(memlockLimit, pinAvailable * 2 / 5), physicalMemory * 9 / 10 / applications) / MESSAGE * MESSAGE;
        if (region < MESSAGE) {
            throw new IllegalStateException("overcommit: the receiving node leaves no room for even a " + (MESSAGE >> 10)
                    + " KiB region (may pin " + pinAvailable + " more bytes, memlock limit " + memlockLimit + ")");
        }
        return new Shape(applications, region, pinAvailable, physicalMemory, reduced ? 2 : 8, 2);
    }

    /** Runs the job {@link #ROUNDS} times in each mode, alternating their order, into {@code runs} under {@code setting}. */
    private static void runRounds(int applications, Setting setting, PrintWriter progress, Map<Setting, Map<RegistrationMode, List<JobRun>>> runs,
            JobRunner job) throws Exception {
        for (int round = 0; round < ROUNDS; round++) {
            // A B, then B A: whichever runs second in a round does not always benefit from the first.
            for (int i = 0; i < MODES.length; i++) {
                RegistrationMode mode = MODES[round % 2 == 0 ? i : MODES.length - 1 - i];
                progress.printf(Locale.ROOT, "overcommit: %s, round %d, %d applications, %s ...%n", setting.label(), round + 1, applications, mode);
                progress.flush();
                JobRun run = job.run(mode);
                progress.printf(Locale.ROOT, "overcommit: %s, round %d, %s: batches %s, %.2f s%n", setting.label(), round + 1, mode, run.batches(),
                        run.seconds());
                runs.computeIfAbsent(setting, d -> new LinkedHashMap<>()).computeIfAbsent(mode, m -> new ArrayList<>()).add(run);
            }
        }
    }

    /** Runs the whole job once in one mode. */
    @FunctionalInterface
    private interface JobRunner {
        JobRun run(RegistrationMode mode) throws Exception;
    }

    /** How one mode ran the job: its batches (applications that ran together), the refusal that split them, and the time. */
    record JobRun(RegistrationMode mode, List<Integer> batches, String refusal, double seconds, long bytes) {
    }

    private static JobRun runEmbeddedJob(Shape shape, RegistrationMode mode, long linkDelayNs) throws Exception {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.IN_PROCESS, c -> {
            c.security().plaintext();
            c.fabric().delayNs(linkDelayNs);
            c.kernel().physicalMemoryBytes(shape.physicalMemoryBytes()).nodePinLimitBytes(shape.pinLimitBytes())
                    .memlockLimitBytes(shape.pinLimitBytes());
        })) {
            List<Application> applications = new ArrayList<>();
            for (int i = 0; i < shape.applications(); i++) {
                applications.add(new EmbeddedApplication(i, cluster.node(1), cluster.node(2), shape));
            }
            return runJob(shape, mode, applications);
        }
    }

    private static JobRun runClusterJob(ApplicationPair pair, Shape shape, RegistrationMode mode) throws Exception {
        List<ClusterApplication> applications = new ArrayList<>();
        try {
            for (int i = 0; i < shape.applications(); i++) {
                applications.add(new ClusterApplication(i, pair, shape));
            }
            return runJob(shape, mode, applications);
        } finally {
            for (ClusterApplication app : applications) {
                app.close();
            }
        }
    }

    /**
     * The job: registers every waiting application's region that the node accepts, runs those
     * together, deregisters them, and so on until every application has run.
     */
    private static JobRun runJob(Shape shape, RegistrationMode mode, List<? extends Application> applications) throws Exception {
        List<Application> waiting = new ArrayList<>(applications);
        List<Integer> batches = new ArrayList<>();
        String refusal = null;
        long start = System.nanoTime();
        while (!waiting.isEmpty()) {
            List<Application> batch = new ArrayList<>();
            for (Application app : waiting) {
                String refused = app.register(mode);
                if (refused == null) {
                    batch.add(app);
                } else if (refusal == null) {
                    refusal = "application " + (app.index() + 1) + ": " + refused;
                }
            }
            if (batch.isEmpty()) {
                throw new IllegalStateException("overcommit: not one application's region can be registered: " + refusal);
            }
            runTogether(batch);
            for (Application app : batch) {
                app.deregister();
            }
            waiting.removeAll(batch);
            batches.add(batch.size());
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        return new JobRun(mode, batches, refusal, seconds, shape.applications() * shape.regionBytes() * shape.passes());
    }

    private static void runTogether(List<Application> batch) throws Exception {
        ExecutorService threads = Executors.newFixedThreadPool(batch.size());
        try {
            List<Future<?>> done = new ArrayList<>();
            for (Application app : batch) {
                done.add(threads.submit(() -> {
                    app.writeAll();
                    return null;
                }));
            }
            for (Future<?> f : done) {
                f.get(10, TimeUnit.MINUTES);
            }
        } finally {
            threads.shutdownNow();
        }
    }

    /** One application of the job: a region on the receiving node, and a peer that writes the whole region over and over. */
    private interface Application {
        int index();

        /**
         * Registers the region (PINNED pins it all, or is refused); ON_DEMAND then prefetches it, as
         * an ODP application advises. Returns why the node refused it, or null.
         */
        String register(RegistrationMode mode) throws Exception;

        void writeAll() throws InterruptedException;

        void deregister();
    }

    /** An application on nodes in this JVM: an endpoint on the receiving node with its region, and a peer that writes into it. */
    private static final class EmbeddedApplication implements Application {
        private final int index;
        private final Shape shape;
        private final Endpoint receiver;
        private final Link link;
        private final MemoryRegion source;
        private final long target;
        private MemoryRegion region;

        EmbeddedApplication(int index, PagewireNode writerNode, PagewireNode receiverNode, Shape shape) {
            this.index = index;
            this.shape = shape;
            Endpoint writer = writerNode.nic().openEndpoint("overcommit-writer-" + index);
            receiver = receiverNode.nic().openEndpoint("overcommit-app-" + index);
            link = Link.connect(writerNode.nic(), writer, receiverNode.nic(), receiver);
            long src = writer.space().allocate(MESSAGE);
            writer.space().store(src, new byte[MESSAGE], 0, MESSAGE);
            source = writer.register(src, MESSAGE, RegistrationMode.PINNED, Access.all());
            target = receiver.space().allocate(shape.regionBytes());
        }

        @Override
        public int index() {
            return index;
        }

        @Override
        public String register(RegistrationMode mode) throws Exception {
            try {
                region = receiver.register(target, shape.regionBytes(), mode, Access.all());
            } catch (PinLimitExceededException e) {
                return e.getMessage();
            }
            if (mode == RegistrationMode.ON_DEMAND) {
                receiver.advise(region, target, shape.regionBytes(), Endpoint.Advice.PREFETCH_WRITE).get(5, TimeUnit.MINUTES);
            }
            return null;
        }

        @Override
        public void deregister() {
            receiver.deregister(region);
            region = null;
        }

        @Override
        public void writeAll() throws InterruptedException {
            long slots = shape.regionBytes() / MESSAGE;
            link.stream(0, slots * shape.passes(), shape.depth(), i -> WorkRequest.write(i, source.lkey(), source.address(), MESSAGE,
                    target + i % slots * MESSAGE, region.rkey()), "overcommit: application " + (index + 1));
        }
    }

    /** An application on two nodes of a running cluster, through the SDK: the same as {@link EmbeddedApplication}. */
    private static final class ClusterApplication implements Application, AutoCloseable {
        private final int index;
        private final Shape shape;
        private final ClusterLink link;
        private final long target;
        private io.pagewire.client.MemoryRegion region;

        ClusterApplication(int index, ApplicationPair pair, Shape shape) {
            this.index = index;
            this.shape = shape;
            link = ClusterLink.open(pair.requester(), pair.responder(), "overcommit-" + index, MESSAGE);
            target = link.receiver().allocate(shape.regionBytes());
        }

        @Override
        public int index() {
            return index;
        }

        @Override
        public String register(RegistrationMode mode) {
            try {
                region = link.receiver().register(target, shape.regionBytes(), io.pagewire.client.RegistrationMode.valueOf(mode.name()),
                        io.pagewire.client.Access.all());
            } catch (PagewireException.ResourceExhaustedException e) {
                return e.getMessage();
            }
            if (mode == RegistrationMode.ON_DEMAND) {
                region.advise(Advice.PREFETCH_WRITE, target, shape.regionBytes());
            }
            return null;
        }

        @Override
        public void deregister() {
            region.close();
            region = null;
        }

        @Override
        public void writeAll() throws InterruptedException {
            long slots = shape.regionBytes() / MESSAGE;
            io.pagewire.client.MemoryRegion source = link.source();
            link.stream(0, slots * shape.passes(), shape.depth(), i -> io.pagewire.client.WorkRequest.write(source, source.address(), MESSAGE,
                    target + i % slots * MESSAGE, region.rkey()), 300, "overcommit: application " + (index + 1));
        }

        @Override
        public void close() {
            link.close();
        }
    }

    /**
     * The table and claims. The speed-up claim is judged on every setting whose link has delay (or is
     * a running cluster's); the bare loopback link's speed-ups are given beside, with {@code bareLink}
     * saying why they are not judged.
     */
    private static ExperimentResult result(int applications, Map<Setting, Map<RegistrationMode, List<JobRun>>> runs, String bareLink) {
        List<List<Object>> rows = new ArrayList<>();
        Map<String, double[][]> series = new LinkedHashMap<>();
        List<String> split = new ArrayList<>();
        List<String> together = new ArrayList<>();
        List<String> judged = new ArrayList<>();
        List<String> bare = new ArrayList<>();
        boolean allSplit = true;
        boolean allTogether = true;
        boolean allFaster = true;
        for (Map.Entry<Setting, Map<RegistrationMode, List<JobRun>>> bySetting : runs.entrySet()) {
            Setting setting = bySetting.getKey();
            List<JobRun> pinnedRuns = bySetting.getValue().get(RegistrationMode.PINNED);
            List<JobRun> onDemandRuns = bySetting.getValue().get(RegistrationMode.ON_DEMAND);
            JobRun pinned = median(pinnedRuns);
            JobRun onDemand = median(onDemandRuns);
            for (JobRun run : List.of(pinned, onDemand)) {
                rows.add(List.of(setting.workload(), setting.link(), run.mode().name(), run.batches().toString(), run.seconds(),
                        seconds(run == pinned ? pinnedRuns : onDemandRuns), run.bytes() / run.seconds() / 1e6, pinned.seconds() / run.seconds()));
            }
            double speedup = pinned.seconds() / onDemand.seconds();
            series.put(setting.label(), new double[][] {new double[2], {pinned.seconds(), onDemand.seconds()}});
            // Every PINNED run must split, not only the median one: the refusal is what the claim is about.
            boolean pinnedSplit = pinnedRuns.stream().allMatch(r -> r.batches().size() > 1);
            allSplit &= pinnedSplit;
            split.add(setting.label() + ": PINNED ran in batches of " + pinned.batches()
                    + (pinned.refusal() == null ? ", nothing refused" : ", refused: " + pinned.refusal()));
            boolean onDemandTogether = onDemandRuns.stream().allMatch(r -> r.batches().equals(List.of(applications)));
            allTogether &= onDemandTogether;
            together.add(setting.label() + ": " + onDemand.batches());
            String figure = String.format(Locale.ROOT, "%s: %.2fx", setting.label(), speedup);
            if (setting.link().equals("0")) {
                bare.add(figure);
            } else {
                judged.add(figure);
                allFaster &= speedup > 1;
            }
        }
        String evidence = String.join("; ", judged) + String.format(Locale.ROOT, " (medians of %d alternated rounds)", ROUNDS);
        if (!bare.isEmpty()) {
            evidence += "; " + String.join("; ", bare) + ", " + bareLink;
        }
        List<Claim> claims = List.of(
                new Claim("registered memory beyond the pin limit keeps pinning applications from running together", allSplit,
                        String.format(Locale.ROOT, "%d applications each time; %s", applications, String.join("; ", split))),
                new Claim("on-demand paging runs them all at once", allTogether, "ON_DEMAND ran in batches of " + String.join("; ", together)),
                new Claim("and the whole job finishes sooner (the paper: up to 1.9x), for applications that leave the link idle",
                        !judged.isEmpty() && allFaster, evidence));
        return new ExperimentResult(List.of("workload", "link delay us", "mode", "batches", "job s (median)", "every round s", "MB/s",
                "speedup over PINNED"), rows, new ExperimentResult.Plot("overcommit: the whole job's time", "registration mode", "seconds (median)",
                        false, series, List.of("PINNED", "ON_DEMAND")),
                claims);
    }

    private static JobRun median(List<JobRun> runs) {
        List<JobRun> sorted = new ArrayList<>(runs);
        sorted.sort(Comparator.comparingDouble(JobRun::seconds));
        return sorted.get(sorted.size() / 2);
    }

    private static String seconds(List<JobRun> runs) {
        return String.join(" ", runs.stream().map(r -> String.format(Locale.ROOT, "%.2f", r.seconds())).toList());
    }
}
