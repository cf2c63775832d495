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
 * starts (with a small pin limit, over a bare link and one with added delay), or against two nodes
 * of a running cluster, through the SDK, sized from the receiving node's own limits.
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
        Map<String, Map<RegistrationMode, List<JobRun>>> runs = new LinkedHashMap<>();
        // An unrecorded run per mode first: the JIT compiles each mode's paths during it.
        progress.println("overcommit: warming up ...");
        progress.flush();
        for (RegistrationMode mode : MODES) {
            runEmbeddedJob(shape, mode, 0);
        }
        for (long delay : LINK_DELAYS_NS) {
            String link = String.valueOf(delay / 1000);
            runRounds(shape, link, progress, runs, mode -> runEmbeddedJob(shape, mode, delay));
        }
        return result(shape, runs, "with " + LINK_DELAYS_NS[LINK_DELAYS_NS.length - 1] / 1000 + " us of link delay each way",
                "on the bare loopback link, where two applications already keep this machine's 2 cores busy");
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
            Map<String, Map<RegistrationMode, List<JobRun>>> runs = new LinkedHashMap<>();
            for (RegistrationMode mode : MODES) {
                runClusterJob(pair, shape, mode);
            }
            runRounds(shape, CLUSTER_LINK, progress, runs, mode -> runClusterJob(pair, shape, mode));
            return result(shape, runs, "on the cluster's link between " + pair.requester().node().nodeId() + " and "
                    + pair.responder().node().nodeId(), null);
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

    /** Runs the job {@link #ROUNDS} times in each mode, alternating their order, into {@code runs} under {@code link}. */
    private static void runRounds(Shape shape, String link, PrintWriter progress, Map<String, Map<RegistrationMode, List<JobRun>>> runs,
            JobRunner job) throws Exception {
        for (int round = 0; round < ROUNDS; round++) {
            // A B, then B A: whichever runs second in a round does not always benefit from the first.
            for (int i = 0; i < MODES.length; i++) {
                RegistrationMode mode = MODES[round % 2 == 0 ? i : MODES.length - 1 - i];
                progress.printf(Locale.ROOT, "overcommit: %s, round %d, %d applications of %d MiB, pin limit %d MiB, %s ...%n",
                        link.equals(CLUSTER_LINK) ? "the cluster's link" : "link delay " + link + " us", round + 1,
                        shape.applications(), shape.regionBytes() >> 20, shape.pinLimitBytes() >> 20, mode);
                progress.flush();
                runs.computeIfAbsent(link, d -> new LinkedHashMap<>()).computeIfAbsent(mode, m -> new ArrayList<>()).add(job.run(mode));
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
            link = Link.connect(writer, receiver);
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
     * The table and claims. The speed-up claim is judged on the last link of {@code runs}
     * ({@code judgedOn} says which), and the evidence also gives the first link's speed-up with
     * {@code firstLink} saying what it is, when there are two.
     */
    private static ExperimentResult result(Shape shape, Map<String, Map<RegistrationMode, List<JobRun>>> runs, String judgedOn, String firstLink) {
        List<List<Object>> rows = new ArrayList<>();
        Map<String, double[][]> series = new LinkedHashMap<>();
        Map<String, Double> speedups = new LinkedHashMap<>();
        JobRun firstPinned = null;
        JobRun firstOnDemand = null;
        for (Map.Entry<String, Map<RegistrationMode, List<JobRun>>> byLink : runs.entrySet()) {
            List<JobRun> pinnedRuns = byLink.getValue().get(RegistrationMode.PINNED);
            List<JobRun> onDemandRuns = byLink.getValue().get(RegistrationMode.ON_DEMAND);
            JobRun pinned = median(pinnedRuns);
            JobRun onDemand = median(onDemandRuns);
            firstPinned = firstPinned == null ? pinned : firstPinned;
            firstOnDemand = firstOnDemand == null ? onDemand : firstOnDemand;
            for (JobRun run : List.of(pinned, onDemand)) {
                rows.add(List.of(byLink.getKey(), run.mode().name(), run.batches().toString(), run.seconds(),
                        seconds(run == pinned ? pinnedRuns : onDemandRuns), run.bytes() / run.seconds() / 1e6, pinned.seconds() / run.seconds()));
            }
            speedups.put(byLink.getKey(), pinned.seconds() / onDemand.seconds());
            series.put(byLink.getKey().equals(CLUSTER_LINK) ? "the cluster's link" : "link delay " + byLink.getKey() + " us", new double[][] {new double[2], {pinned.seconds(), onDemand.seconds()}});
        }
        List<Double> bySpeed = new ArrayList<>(speedups.values());
        double speedup = bySpeed.get(bySpeed.size() - 1);
        String evidence = String.format(Locale.ROOT, "%.2fx %s (medians of %d alternated rounds)", speedup, judgedOn, ROUNDS);
        if (bySpeed.size() > 1) {
            evidence += String.format(Locale.ROOT, "; %.2fx %s", bySpeed.get(0), firstLink);
        }
        List<Claim> claims = List.of(
                new Claim("registered memory beyond the pin limit keeps pinning applications from running together", firstPinned.batches().size() > 1,
                        String.format(Locale.ROOT, "%d applications of %.1f MiB against a %d MiB pin limit: PINNED ran in batches of %s; %s",
                                shape.applications(), shape.regionBytes() / (double) (1 << 20), shape.pinLimitBytes() >> 20, firstPinned.batches(),
                                firstPinned.refusal() == null ? "nothing refused" : "refused: " + firstPinned.refusal())),
                new Claim("on-demand paging runs them all at once", firstOnDemand.batches().equals(List.of(shape.applications())),
                        "ON_DEMAND ran in batches of " + firstOnDemand.batches()),
                new Claim("and the whole job finishes sooner (the paper: up to 1.9x), for applications that leave the link idle", speedup > 1, evidence));
        return new ExperimentResult(List.of("link delay us", "mode", "batches", "job s (median)", "every round s", "MB/s", "speedup over PINNED"),
                rows, new ExperimentResult.Plot("overcommit: the whole job's time", "registration mode", "seconds (median)", false, series,
                        List.of("PINNED", "ON_DEMAND")),
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
