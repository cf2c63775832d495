package io.pagewire.tools.experiment;

import io.pagewire.node.PagewireNode;
import io.pagewire.node.metrics.Metric;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.tools.perf.VerbsPerftest;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.stream.Collectors;

/**
 * {@code context-cache} (ScalaRNIC; Husky and Harmonic): a NIC keeps queue pair and region state in an
 * on-chip cache, and once the connections in use outgrow it, each message waits for its context to
 * be fetched from host memory and the message rate falls, by about half on commercial NICs with a
 * few thousand connections. Debian's {@code ib_write_bw} runs unmodified through the verbs library
 * between two nodes, 64-byte WRITEs over {@code -q} queue pairs with four outstanding on each
 * ({@code -t 4}, so the NIC moves between pairs message by message, as many connections' traffic
 * does), one region for all of them or one each ({@code --mr_per_qp}). Both nodes' context caches
 * are set between runs (8-way, LRU, a miss costing {@code pagewire.nic.contextCacheMissNs}'s
 * default, a PCIe round trip, and in the smallest cache also {@link #SCALED_MISS_NS}), every size
 * alternating with none in each round, so each rate is
 * compared with the rate of the same pairs without the cache in the same round; the nodes' meters
 * give each run's miss ratio. Against a running cluster's nodes it sweeps the pairs over the cache
 * they were started with.
 */
public final class ContextCacheExperiment implements Experiment {
    private static final String WRITE_BW = "ib_write_bw";
    private static final int SIZE = 64;
    private static final int WAYS = 8;
    /** pagewire.nic.contextCacheMissNs's default: a context fetched over PCIe. */
    static final long PCIE_MISS_NS = 1_000;
    /**
     * A miss as dear as one of this NIC's messages: Pagewire's emulated NIC spends about 10 us of CPU on a small message where a
     * commercial one spends nanoseconds, so at the PCIe round trip a miss is a small share of a message here, and a miss of
     * this many nanoseconds keeps the proportion that makes a thrashing cache halve a real NIC's rate.
     */
    static final long SCALED_MISS_NS = 10_000;

    /**
     * How big a run is: the queue pair counts, the cache sizes (entries), the most queue pairs the
     * regions axis (a region per pair) runs at (0: not at all), whether the smallest cache also runs
     * with the scaled miss, seconds per run and rounds.
     */
    record Shape(List<Integer> queuePairs, List<Integer> cacheEntries, int regionPerPairUpTo, boolean scaledMiss, int seconds, int rounds) {
    }

    /** Past 256 pairs only the queue pair axis runs: perftest takes 10-20 s to set up 512-1024 pairs, and the region axis's knee is below. */
    static final Shape DEFAULT = new Shape(List.of(8, 32, 128, 256, 512, 1024), List.of(64, 256), 256, true, 2, 3);
    static final Shape REDUCED = new Shape(List.of(8, 256), List.of(64), 0, false, 1, 1);

    @Override
    public String name() {
        return "context-cache";
    }

    @Override
    public String paper() {
        return "ScalaRNIC, Husky and Harmonic, on commercial NICs: once a few thousand connections thrash the NIC's on-chip cache of queue"
                + " pair and region state, the message rate of small operations falls by about half.";
    }

    /** What a miss costs in a running cluster's cache: whatever its nodes were started with, which they do not report. */
    static final long CLUSTER_MISS = -1;

    /**
     * One run: queue pairs, the cache's entries (0: none) and what a miss costs ({@link #CLUSTER_MISS}:
     * the running cluster's), and whether each pair has its own region.
     */
    record Case(int queuePairs, int entries, long missNs, boolean regionPerPair) {
        String label() {
            return "-q " + queuePairs + (regionPerPair ? " --mr_per_qp" : "") + ", "
                    + (entries == 0 ? "no cache" : entries + " entries, " + missCost());
        }

        String missCost() {
            return missNs == CLUSTER_MISS ? "the cluster's miss cost" : missNs / 1000 + " us a miss";
        }

        /** Contexts one node's NIC reads in turn: a queue pair's each, and each region's. */
        int contexts() {
            return queuePairs + (regionPerPair ? queuePairs : 1);
        }
    }

    /**
     * What one run measured: ib_write_bw's messages and rate and both nodes' context cache lookups. A
     * message reads its pair's context several times on each node (each packet sent or received, the
     * acknowledgement), so what a thrashing cache costs is its misses per message, not per read.
     */
    record Sample(long messages, double mpps, long qpHits, long qpMisses, long regionHits, long regionMisses) {
        double missesPerMessage() {
            return messages == 0 ? 0 : (double) (qpMisses + regionMisses) / messages;
        }
    }

    /** A case's median sample and its rate against the same pairs without the cache, the median of the rounds' ratios. */
    record Row(Case c, Sample median, double ratio) {
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        if (settings.cluster() != null) {
            return runOnCluster(settings, progress);
        }
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        int most = shape.queuePairs().stream().mapToInt(Integer::intValue).max().orElse(1);
        try (VerbsNodes nodes = VerbsNodes.start(c -> {
            c.nic().randomSeed(settings.seed()).queuePairsPerSession(Math.max(256, most));
            // Every pair holds credits in the system buffer: room for thousands.
            c.kernel().systemBufferBytes(64L << 20);
        }, WRITE_BW)) {
            progress.printf(Locale.ROOT, "context-cache: ib_write_bw -s %d -t 4 over %s queue pairs, caches of %s entries (%d-way, %d ns a miss),"
                    + " %d s a run, %d round(s) ...%n", SIZE, shape.queuePairs(), shape.cacheEntries(), WAYS, PCIE_MISS_NS, shape.seconds(),
                    shape.rounds());
            progress.flush();
            measure(nodes, new Case(64, 0, 0, false), shape); // the path's first runs compile it: not recorded
            List<Row> rows = new ArrayList<>();
            for (int queuePairs : shape.queuePairs()) {
                // The first run at a new count is slower (at 512 pairs a quarter of the next's rate): not recorded either.
                measure(nodes, new Case(queuePairs, 0, 0, false), shape);
                List<Case> cases = new ArrayList<>();
                int smallest = shape.cacheEntries().get(0);
                int largest = shape.cacheEntries().get(shape.cacheEntries().size() - 1);
                cases.add(new Case(queuePairs, 0, 0, false));
                shape.cacheEntries().forEach(entries -> cases.add(new Case(queuePairs, entries, PCIE_MISS_NS, false)));
                if (shape.scaledMiss()) {
                    cases.add(new Case(queuePairs, smallest, SCALED_MISS_NS, false));
                }
                if (queuePairs <= shape.regionPerPairUpTo()) {
                    cases.add(new Case(queuePairs, 0, 0, true));
                    cases.add(new Case(queuePairs, largest, PCIE_MISS_NS, true));
                }
                Map<Case, List<Sample>> samples = new LinkedHashMap<>();
                for (int round = 0; round < shape.rounds(); round++) {
                    // Every other round runs the cases backwards: a run's place in the round (the machine's drift) falls on all.
                    List<Case> order = new ArrayList<>(cases);
                    if (round % 2 == 1) {
                        Collections.reverse(order);
                    }
                    for (Case c : order) {
                        Sample s = measure(nodes, c, shape);
                        samples.computeIfAbsent(c, k -> new ArrayList<>()).add(s);
                        progress.printf(Locale.ROOT, "context-cache: %s, round %d: %.4f Mpps, %.2f misses a message%n", c.label(),
                                round + 1, s.mpps(), s.missesPerMessage());
                        progress.flush();
                    }
                }
                for (Case c : cases) {
                    List<Sample> mine = samples.get(c);
                    List<Sample> without = samples.get(new Case(c.queuePairs(), 0, 0, c.regionPerPair()));
                    double[] ratios = new double[mine.size()];
                    for (int round = 0; round < mine.size(); round++) {
                        ratios[round] = mine.get(round).mpps() / without.get(round).mpps();
                    }
                    Arrays.sort(ratios);
                    rows.add(new Row(c, VerbsNodes.median(mine, Sample::mpps), ratios[ratios.length / 2]));
                }
            }
            return result(shape, rows);
        }
    }

    /**
     * Against two nodes of a running cluster (the programs run beside them, on this host or in their
     * containers: see {@link VerbsNodes#attach}): the queue pair sweep over the cache the nodes were started with
     * ({@code pagewire.nic.contextCacheEntries}, read from {@code pagewire_nic_context_cache_entries}),
     * misses counted from the nodes' meters. A running node's cache is not resized, so there is no
     * run without it to compare rates with: the counting claims are judged, the rates printed.
     */
    private ExperimentResult runOnCluster(ExperimentSettings settings, PrintWriter progress) {
        try (VerbsNodes nodes = VerbsNodes.attach(settings, WRITE_BW)) {
            int entries = (int) nodes.responderStats().sum(Metric.CONTEXT_CACHE_ENTRIES.meter().prometheusName());
            if (entries == 0) {
                throw new IllegalArgumentException("context-cache: " + nodes.responderId() + " models no context cache"
                        + " (pagewire.nic.contextCacheEntries=0): start the cluster's nodes with one to run this experiment against them");
            }
            Shape shape = settings.reduced() ? REDUCED : DEFAULT;
            progress.printf(Locale.ROOT, "context-cache: %s, %s's cache of %d entries: ib_write_bw -s %d -t 4 over %s queue pairs, %d s a run,"
                    + " %d round(s) ...%n", nodes.where(), nodes.responderId(), entries, SIZE, shape.queuePairs(), shape.seconds(), shape.rounds());
            progress.flush();
            List<Row> rows = new ArrayList<>();
            sweep:
            for (int queuePairs : shape.queuePairs()) {
                Case c = new Case(queuePairs, entries, CLUSTER_MISS, false);
                run(nodes, c, shape); // the first run at a new count is slower: not recorded
                List<Sample> samples = new ArrayList<>();
                for (int round = 0; round < shape.rounds(); round++) {
                    Sample sample = run(nodes, c, shape);
                    if (sample == null && !rows.isEmpty()) {
                        // The cluster's nodes may allow fewer pairs a session (pagewire.quota.queuePairsPerSession), or hold fewer pairs' credits
                        // (pagewire.kernel.systemBufferBytes), than the sweep asks.
                        progress.printf(Locale.ROOT, "context-cache: ib_write_bw %s failed against the cluster, so the sweep stops at %d pairs:%n%s%n",
                                c.label(), rows.get(rows.size() - 1).c().queuePairs(), nodes.programs().failure());
                        break sweep;
                    }
                    if (sample == null) {
                        throw new IllegalStateException("ib_write_bw " + c.label() + " against the cluster failed: " + nodes.programs().failure());
                    }
                    samples.add(sample);
                    progress.printf(Locale.ROOT, "context-cache: %s, round %d: %.4f Mpps, %.2f misses a message%n", c.label(), round + 1,
                            sample.mpps(), sample.missesPerMessage());
                    progress.flush();
                }
                rows.add(new Row(c, VerbsNodes.median(samples, Sample::mpps), Double.NaN));
            }
            return result(new Shape(shape.queuePairs(), List.of(entries), 0, false, shape.seconds(), shape.rounds()), rows);
        }
    }

    /** ib_write_bw's options for a case, the same on both sides. */
    private static List<String> options(Case c, Shape shape) {
        List<String> options = new ArrayList<>(List.of("-s", String.valueOf(SIZE), "-q", String.valueOf(c.queuePairs()), "-t", "4", "-D",
                String.valueOf(shape.seconds())));
        if (c.regionPerPair()) {
            options.add("--mr_per_qp");
        }
        return options;
    }

    private static Sample measure(VerbsNodes nodes, Case c, Shape shape) {
        Sample sample = run(nodes, c, shape);
        if (sample == null) {
            throw new IllegalStateException("ib_write_bw " + c.label() + " failed: " + nodes.programs().failure() + "\ncounters:\n"
                    + nodes.requesterStats().counted() + "\n" + nodes.responderStats().counted());
        }
        return sample;
    }

    /**
     * One run of a case, or null when ib_write_bw failed ({@code nodes.programs().failure()} says why);
     * on nodes this experiment started, with the case's cache set on both NICs for the run.
     */
    private static Sample run(VerbsNodes nodes, Case c, Shape shape) {
        List<PagewireNode> both = nodes.embedded() ? List.of(nodes.requester(), nodes.responder()) : List.of();
        for (PagewireNode node : both) {
            node.nic().contextCache(c.entries(), Math.min(WAYS, Math.max(1, c.entries())), c.missNs());
        }
        try {
            List<NodeStats> before = List.of(nodes.requesterStats(), nodes.responderStats());
            VerbsPerftest.MessageRate rate = nodes.programs().writeMessageRate(nodes.requesterPlace(), nodes.responderPlace(), options(c, shape));
            if (rate == null) {
                return null;
            }
            List<NodeStats> after = List.of(nodes.requesterStats(), nodes.responderStats());
            long[] grew = new long[4];
            NicCounter[] kinds = {NicCounter.CONTEXT_QP_HITS, NicCounter.CONTEXT_QP_MISSES, NicCounter.CONTEXT_REGION_HITS,
                NicCounter.CONTEXT_REGION_MISSES};
            for (int i = 0; i < 2; i++) {
                for (int k = 0; k < kinds.length; k++) {
                    grew[k] += after.get(i).since(before.get(i), kinds[k]);
                }
            }
            return new Sample(rate.messages(), rate.mpps(), grew[0], grew[1], grew[2], grew[3]);
        } finally {
            for (PagewireNode node : both) {
                node.nic().contextCache(0, 1, 0);
            }
        }
    }

    /**
     * The table, plot and claims. Rows without a rate to compare with (a running cluster's: its cache is
     * not resized) plot their misses a message instead, and judge no rate claim.
     */
    static ExperimentResult result(Shape shape, List<Row> rows) {
        List<List<Object>> table = new ArrayList<>();
        Map<String, double[][]> series = new LinkedHashMap<>();
        boolean rates = rows.stream().noneMatch(r -> r.c().missNs() == CLUSTER_MISS);
        for (Row r : rows) {
            Sample s = r.median();
            table.add(List.of(r.c().queuePairs(), r.c().regionPerPair() ? "one per pair" : "one", r.c().contexts(),
                    r.c().entries() == 0 ? "none" : String.valueOf(r.c().entries()),
                    r.c().entries() == 0 ? "-" : r.c().missNs() == CLUSTER_MISS ? "the cluster's" : String.valueOf(r.c().missNs() / 1000),
                    Math.round(s.mpps() * 1e6) / 1e3, String.format(Locale.ROOT, "%.2f", s.missesPerMessage()),
                    r.c().entries() == 0 || Double.isNaN(r.ratio()) ? "-" : String.format(Locale.ROOT, "%.2f", r.ratio())));
            if (r.c().entries() > 0) {
                String name = r.c().entries() + " entries, " + r.c().missCost() + (r.c().regionPerPair() ? ", a region per pair" : "");
                ExperimentResult.Plot.addPoint(series, name, r.c().queuePairs(), rates ? r.ratio() : s.missesPerMessage());
            }
        }
        // Fitting: the contexts in use are at most half the cache (so a set's share of them fits its ways too). Thrashing: at least
        // four times it, so a pair's context has been evicted by the others' since its last turn.
        List<Row> cached = rows.stream().filter(r -> r.c().entries() > 0).toList();
        List<Row> fitting = cached.stream().filter(r -> r.c().contexts() * 2 <= r.c().entries()).toList();
        List<Row> thrashing = cached.stream().filter(r -> r.c().contexts() >= 4 * r.c().entries()).toList();
        int smallest = shape.cacheEntries().get(0);
        int largest = shape.cacheEntries().get(shape.cacheEntries().size() - 1);
        List<Claim> claims = new ArrayList<>();
        claims.add(new Claim("while the contexts in use fit the cache, messages do not miss", !fitting.isEmpty()
                && fitting.stream().allMatch(r -> r.median().missesPerMessage() < 0.01),
                fitting.stream().map(r -> String.format(Locale.ROOT, "%s: %.3f misses a message", r.c().label(), r.median().missesPerMessage()))
                        .collect(Collectors.joining("; "))));
        claims.add(new Claim("once they outgrow it, messages miss: the pairs take turns, so LRU has evicted a pair's context by its next turn",
                !thrashing.isEmpty() && thrashing.stream().allMatch(r -> r.median().missesPerMessage() >= 0.25),
                thrashing.stream().map(r -> String.format(Locale.ROOT, "%s: %.2f misses a message", r.c().label(), r.median().missesPerMessage()))
                        .collect(Collectors.joining("; "))));
        for (long missNs : cached.stream().map(r -> r.c().missNs()).filter(missNs -> missNs != CLUSTER_MISS).distinct().sorted().toList()) {
            double fittingRatio = fitting.stream().filter(r -> r.c().missNs() == missNs).mapToDouble(Row::ratio).min().orElse(Double.NaN);
            double thrashingRatio = thrashing.stream().filter(r -> r.c().missNs() == missNs).mapToDouble(Row::ratio).max().orElse(Double.NaN);
            claims.add(new Claim(String.format(Locale.ROOT, "with a miss costing %d us, the message rate falls where the cache thrashes"
                    + " (the papers: by about half)", missNs / 1000), thrashingRatio < 0.8,
                    String.format(Locale.ROOT, "at most %.2fx the rate of the same pairs without the cache where it thrashes, at least %.2fx"
                            + " where they fit", thrashingRatio, fittingRatio)));
        }
        if (shape.cacheEntries().size() > 1) {
            int kneeSmall = knee(rows, smallest, false);
            int kneeLarge = knee(rows, largest, false);
            claims.add(new Claim("a larger cache moves the knee to more queue pairs", kneeLarge > kneeSmall,
                    String.format(Locale.ROOT, "messages stay under 0.1 misses up to %d pairs with %d entries, up to %d with %d", kneeSmall,
                            smallest, kneeLarge, largest)));
        }
        if (shape.regionPerPairUpTo() > 0) {
            int shared = knee(rows, largest, false);
            int own = knee(rows, largest, true);
            claims.add(new Claim("a region per pair adds the regions' contexts, so the knee comes at fewer pairs",
                    own < shared, String.format(Locale.ROOT, "with %d entries, messages stay under 0.1 misses up to %d pairs sharing a"
                            + " region, up to %d with one each", largest, shared, own)));
        }
        return new ExperimentResult(List.of("queue pairs", "regions", "contexts per node", "cache entries", "us a miss", "Kmsg/s",
                "misses a message", "rate against no cache"), table,
                rates ? new ExperimentResult.Plot("context-cache: ib_write_bw's message rate against no cache", "queue pairs (-q)",
                        "rate against no cache", true, series)
                        : new ExperimentResult.Plot("context-cache: ib_write_bw's misses in the cluster's context cache", "queue pairs (-q)",
                                "misses a message", true, series),
                claims);
    }

    /** The most queue pairs at which messages missed less than 0.1 times each with {@code entries} at the PCIe miss cost (0 if none). */
    private static int knee(List<Row> rows, int entries, boolean regionPerPair) {
        return rows.stream().filter(r -> r.c().entries() == entries && r.c().missNs() == PCIE_MISS_NS && r.c().regionPerPair() == regionPerPair
                && r.median().missesPerMessage() < 0.1).mapToInt(r -> r.c().queuePairs()).max().orElse(0);
    }
}
