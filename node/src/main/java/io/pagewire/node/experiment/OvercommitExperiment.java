package io.pagewire.node.experiment;

import io.pagewire.kernel.PinLimitExceededException;
import io.pagewire.node.EmbeddedCluster;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
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
 * job's time is from the first registration to the last write's completion.
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

    @Override
    public String name() {
        return "overcommit";
    }

    @Override
    public Optional<String> needsOwnNodes() {
        return Optional.of("it sets a node pin limit and a link delay, and reads the kernel's counters");
    }

    @Override
    public String paper() {
        return "NIC on-demand paging (Lesokhin et al., ASPLOS 2017): without pinning, applications whose registered memory together exceeds "
                + "what can be pinned run at once instead of one after another, and the whole job finishes up to 1.9x sooner.";
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        RegistrationMode[] modes = {RegistrationMode.PINNED, RegistrationMode.ON_DEMAND};
        // Unrecorded runs first, one per mode: the JIT compiles each mode's paths during them.
        progress.println("overcommit: warming up ...");
        progress.flush();
        for (RegistrationMode mode : modes) {
            runJob(shape, mode, 0);
        }
        Map<Long, Map<RegistrationMode, List<JobRun>>> runs = new LinkedHashMap<>();
        for (long delay : LINK_DELAYS_NS) {
            for (int round = 0; round < ROUNDS; round++) {
                // A B, then B A: whichever runs second in a round does not always benefit from the first.
                for (int i = 0; i < modes.length; i++) {
                    RegistrationMode mode = modes[round % 2 == 0 ? i : modes.length - 1 - i];
                    progress.printf(Locale.ROOT, "overcommit: link delay %d us, round %d, %d applications of %d MiB, pin limit %d MiB, %s ...%n",
                            delay / 1000, round + 1, shape.applications(), shape.regionBytes() >> 20, shape.pinLimitBytes() >> 20, mode);
                    progress.flush();
                    runs.computeIfAbsent(delay, d -> new LinkedHashMap<>()).computeIfAbsent(mode, m -> new ArrayList<>())
                            .add(runJob(shape, mode, delay));
                }
            }
        }
        return result(shape, runs);
    }

    /** How one mode ran the job: its batches (applications that ran together), the refusal that split them, and the time. */
    record JobRun(RegistrationMode mode, long linkDelayNs, List<Integer> batches, String refusal, double seconds, long bytes) {
    }

    private JobRun runJob(Shape shape, RegistrationMode mode, long linkDelayNs) throws Exception {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.IN_PROCESS, c -> {
            c.security().plaintext();
            c.fabric().delayNs(linkDelayNs);
            c.kernel().physicalMemoryBytes(shape.physicalMemoryBytes()).nodePinLimitBytes(shape.pinLimitBytes())
                    .memlockLimitBytes(shape.pinLimitBytes());
        })) {
            List<Application> waiting = new ArrayList<>();
            for (int i = 0; i < shape.applications(); i++) {
                waiting.add(new Application(i, cluster.node(1), cluster.node(2), shape));
            }
            List<Integer> batches = new ArrayList<>();
            String refusal = null;
            long start = System.nanoTime();
            while (!waiting.isEmpty()) {
                List<Application> batch = new ArrayList<>();
                for (Application app : waiting) {
                    try {
                        app.register(mode);
                        batch.add(app);
                    } catch (PinLimitExceededException e) {
                        if (refusal == null) {
                            refusal = "application " + (app.index + 1) + ": " + e.getMessage();
                        }
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
            return new JobRun(mode, linkDelayNs, batches, refusal, seconds, shape.applications() * shape.regionBytes() * shape.passes());
        }
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

    /** One application: an endpoint on the receiving node with its region, and a peer that writes into it. */
    private static final class Application {
        final int index;
        private final Shape shape;
        private final Endpoint receiver;
        private final Link link;
        private final MemoryRegion source;
        private final long target;
        private MemoryRegion region;

        Application(int index, PagewireNode writerNode, PagewireNode receiverNode, Shape shape) {
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

        /** Registers the region (PINNED pins it all, or refuses); ON_DEMAND then prefetches it, as an ODP application advises. */
        void register(RegistrationMode mode) throws Exception {
            region = receiver.register(target, shape.regionBytes(), mode, Access.all());
            if (mode == RegistrationMode.ON_DEMAND) {
                receiver.advise(region, target, shape.regionBytes(), Endpoint.Advice.PREFETCH_WRITE).get(5, TimeUnit.MINUTES);
            }
        }

        void deregister() {
            receiver.deregister(region);
            region = null;
        }

        void writeAll() throws InterruptedException {
            long slots = shape.regionBytes() / MESSAGE;
            link.stream(0, slots * shape.passes(), shape.depth(), i -> WorkRequest.write(i, source.lkey(), source.address(), MESSAGE,
                    target + i % slots * MESSAGE, region.rkey()), "overcommit: application " + (index + 1));
        }
    }

    private static ExperimentResult result(Shape shape, Map<Long, Map<RegistrationMode, List<JobRun>>> runs) {
        List<List<Object>> rows = new ArrayList<>();
        Map<String, double[][]> series = new LinkedHashMap<>();
        Map<Long, Double> speedups = new LinkedHashMap<>();
        JobRun firstPinned = null;
        JobRun firstOnDemand = null;
        for (Map.Entry<Long, Map<RegistrationMode, List<JobRun>>> byDelay : runs.entrySet()) {
            List<JobRun> pinnedRuns = byDelay.getValue().get(RegistrationMode.PINNED);
            List<JobRun> onDemandRuns = byDelay.getValue().get(RegistrationMode.ON_DEMAND);
            JobRun pinned = median(pinnedRuns);
            JobRun onDemand = median(onDemandRuns);
            firstPinned = firstPinned == null ? pinned : firstPinned;
            firstOnDemand = firstOnDemand == null ? onDemand : firstOnDemand;
            for (JobRun run : List.of(pinned, onDemand)) {
                rows.add(List.of(byDelay.getKey() / 1000, run.mode().name(), run.batches().toString(), run.seconds(),
                        seconds(run == pinned ? pinnedRuns : onDemandRuns), run.bytes() / run.seconds() / 1e6, pinned.seconds() / run.seconds()));
            }
            speedups.put(byDelay.getKey(), pinned.seconds() / onDemand.seconds());
            series.put("link delay " + byDelay.getKey() / 1000 + " us", new double[][] {new double[2], {pinned.seconds(), onDemand.seconds()}});
        }
        long latencyBound = LINK_DELAYS_NS[LINK_DELAYS_NS.length - 1];
        double speedup = speedups.get(latencyBound);
        List<Claim> claims = List.of(
                new Claim("registered memory beyond the pin limit keeps pinning applications from running together", firstPinned.batches().size() > 1,
                        String.format(Locale.ROOT, "%d applications of %d MiB against a %d MiB pin limit: PINNED ran in batches of %s; %s",
                                shape.applications(), shape.regionBytes() >> 20, shape.pinLimitBytes() >> 20, firstPinned.batches(),
                                firstPinned.refusal() == null ? "nothing refused" : "refused: " + firstPinned.refusal())),
                new Claim("on-demand paging runs them all at once", firstOnDemand.batches().equals(List.of(shape.applications())),
                        "ON_DEMAND ran in batches of " + firstOnDemand.batches()),
                new Claim("and the whole job finishes sooner (the paper: up to 1.9x), for applications that leave the link idle", speedup > 1,
                        String.format(Locale.ROOT, "%.2fx with %d us of link delay each way (medians of %d alternated rounds); %.2fx on the bare"
                                + " loopback link, where two applications already keep this machine's 2 cores busy", speedup, latencyBound / 1000,
                                ROUNDS, speedups.get(LINK_DELAYS_NS[0]))));
        return new ExperimentResult(List.of("link delay us", "mode", "batches", "job s (median)", "every round s", "MB/s", "speedup over PINNED"),
                rows, new ExperimentResult.Plot("overcommit: the whole job's time", "registration mode", "seconds (median)", false, series,
                        List.of("PINNED", "ON_DEMAND")),
                claims);
    }

    private static JobRun median(List<JobRun> runs) {
        List<JobRun> sorted = new ArrayList<>(runs);
        sorted.sort(java.util.Comparator.comparingDouble(JobRun::seconds));
        return sorted.get(sorted.size() / 2);
    }

    private static String seconds(List<JobRun> runs) {
        return String.join(" ", runs.stream().map(r -> String.format(Locale.ROOT, "%.2f", r.seconds())).toList());
    }
}
