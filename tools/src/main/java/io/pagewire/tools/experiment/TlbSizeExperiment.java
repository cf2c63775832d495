package io.pagewire.tools.experiment;

import io.pagewire.kernel.KernelCounter;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicCounters;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.TlbIndexing;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongFunction;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import java.util.stream.IntStream;

/**
 * {@code tlb-size} (U-Net/MM): a NIC whose receive-side TLB pins what it maps. One node writes
 * single pages into a PIN_ON_MISS region of another, page after page in a sequential, strided or
 * random order over a working set that fits the TLB's reach or exceeds even physical memory, for
 * TLB sizes from 16 entries up; it measures the destination's hit rate (first transmissions), the
 * write throughput and the most pages the kernel held pinned at once. Against a running cluster,
 * whose TLB has one size, the working set sweeps instead (see {@link #runOnCluster}).
 */
public final class TlbSizeExperiment implements Experiment {
    private static final int PAGE = 4096;
    /** Pages between two accesses of the strided pattern. */
    private static final int STRIDE = 16;

    /** The order in which pages of the working set are written. */
    enum Pattern {
        SEQUENTIAL, STRIDED, RANDOM;

        /** The page of the {@code i}-th access. */
        long page(long i, int workingSetPages, SplittableRandom random) {
            return switch (this) {
                case SEQUENTIAL -> i % workingSetPages;
                // Every STRIDE-th page, then again from the next one: all pages, in strides.
                case STRIDED -> (i * STRIDE + i * STRIDE / workingSetPages) % workingSetPages;
                case RANDOM -> random.nextInt(workingSetPages);
            };
        }
    }

    /** How big a run is: TLB sizes, working sets (pages), the node's memory, accesses and writes in flight. */
    record Shape(int[] tlbEntries, int[] workingSetPages, long physicalMemoryBytes, int depth) {
        /** Accesses before measuring: one pass over a working set within the largest TLB, a quarter of a larger one. */
        int warmup(int workingSet) {
            return workingSet <= tlbEntries[tlbEntries.length - 1] ? workingSet : workingSet / 4;
        }

        /** Accesses measured: 64 passes over a small working set, one over a large one. */
        int measured(int workingSet) {
            return workingSet <= tlbEntries[tlbEntries.length - 1] ? 64 * workingSet : workingSet;
        }
    }

    static final Shape DEFAULT = new Shape(new int[] {16, 64, 256, 1024, 4096}, new int[] {512, 16384}, 32L << 20, 16);
    static final Shape REDUCED = new Shape(new int[] {16, 64, 256}, new int[] {128, 2048}, 4L << 20, 8);

    private final TlbIndexing indexing;

    public TlbSizeExperiment(TlbIndexing indexing) {
        this.indexing = indexing;
    }

    @Override
    public String name() {
        return "tlb-size";
    }

    @Override
    public String paper() {
        return "U-Net/MM (Welsh, Basu and von Eicken, 1997) puts a TLB on the NIC and has the kernel pin a page while it is in that TLB: "
                + "the hit rate grows with the TLB's size and is high once the TLB covers the working set, and the pages pinned stay "
                + "bounded by the TLB's entries however large the working set grows, past physical memory too.";
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        if (settings.cluster() != null) {
            return runOnCluster(settings, progress);
        }
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        // The JIT compiles the data path during the first configurations; unrecorded runs first, one
        // that misses every time and one that always hits, keep that out of the rows' throughput.
        progress.println("tlb-size: warming up ...");
        progress.flush();
        for (int entries : new int[] {shape.tlbEntries()[0], shape.tlbEntries()[shape.tlbEntries().length - 1]}) {
            runCell(shape, shape.workingSetPages()[0], Pattern.SEQUENTIAL, entries, settings.seed());
        }
        List<Cell> cells = new ArrayList<>();
        for (int workingSet : shape.workingSetPages()) {
            for (Pattern pattern : Pattern.values()) {
                for (int entries : shape.tlbEntries()) {
                    progress.printf(Locale.ROOT, "tlb-size: %d pages (%s), %s, %d TLB entries ...%n", workingSet,
                            workingSet * (long) PAGE > shape.physicalMemoryBytes() ? "beyond physical memory" : "within memory",
                            pattern.name().toLowerCase(Locale.ROOT), entries);
                    progress.flush();
                    cells.add(runCell(shape, workingSet, pattern, entries, settings.seed()));
                }
            }
        }
        return result(shape, cells);
    }

    /**
     * The experiment on two nodes of a running cluster, whose TLB has the one size it was configured
     * with: the working set sweeps instead, from half the TLB's entries to four times them and (at
     * full size) past the receiving node's physical memory, each pattern over each.
     */
    private ExperimentResult runOnCluster(ExperimentSettings settings, PrintWriter progress) throws Exception {
        try (ApplicationPair pair = ApplicationPair.open(settings)) {
            int entries = (int) NodeStats.read(pair.responder()).sum("pagewire_tlb_entries", "state=capacity");
            long memory = pair.responder().node().physicalMemoryBytes();
            int beyondMemory = (int) Math.min(Integer.MAX_VALUE, memory / PAGE * 5 / 4);
            int[] workingSets = (settings.reduced() ? IntStream.of(Math.max(1, entries / 2), 4 * entries)
                    : IntStream.of(Math.max(1, entries / 2), 4 * entries, Math.max(8 * entries, beyondMemory))).distinct().sorted().toArray();
            Shape shape = new Shape(new int[] {entries}, workingSets, memory, settings.reduced() ? 8 : 16);
            progress.printf(Locale.ROOT, "tlb-size: %s; its TLB has %d entries and it has %d MiB of memory: working sets of %s pages%n", pair.where(),
                    entries, memory >> 20, Arrays.toString(workingSets));
            progress.println("tlb-size: warming up ...");
            progress.flush();
            runCellOnCluster(pair, shape, workingSets[0], Pattern.SEQUENTIAL, settings.seed());
            List<Cell> cells = new ArrayList<>();
            for (int workingSet : workingSets) {
                for (Pattern pattern : Pattern.values()) {
                    progress.printf(Locale.ROOT, "tlb-size: %d pages (%s), %s, the node's %d TLB entries ...%n", workingSet,
                            workingSet * (long) PAGE > memory ? "beyond physical memory" : "within memory", pattern.name().toLowerCase(Locale.ROOT), entries);
                    progress.flush();
                    cells.add(runCellOnCluster(pair, shape, workingSet, pattern, settings.seed()));
                }
            }
            return result(shape, cells);
        }
    }

    /**
     * One working set and pattern on a running cluster, through the SDK: the hit rate and faults from
     * the receiving node's meters, its pinned pages sampled from them every 20 ms (over those it held
     * before the region was registered).
     */
    private static Cell runCellOnCluster(ApplicationPair pair, Shape shape, int workingSet, Pattern pattern, long seed) throws Exception {
        int sourcePages = 16;
        int entries = shape.tlbEntries()[0];
        try (ClusterLink link = ClusterLink.open(pair.requester(), pair.responder(), "tlb-size", sourcePages * PAGE)) {
            io.pagewire.client.Endpoint remote = link.receiver();
            String pinned = "pagewire_memory_pages";
            double pinnedBefore = NodeStats.read(pair.responder()).sum(pinned, "state=pinned");
            long dst = remote.allocate((long) workingSet * PAGE);
            io.pagewire.client.MemoryRegion target = remote.register(dst, (long) workingSet * PAGE, io.pagewire.client.RegistrationMode.PIN_ON_MISS,
                    io.pagewire.client.Access.all());
            io.pagewire.client.MemoryRegion source = link.source();
            SplittableRandom random = new SplittableRandom(seed ^ (31L * workingSet + entries) ^ pattern.ordinal());
            LongFunction<io.pagewire.client.WorkRequest> write = i -> io.pagewire.client.WorkRequest.write(source,
                    source.address() + i % sourcePages * PAGE, PAGE, dst + pattern.page(i, workingSet, random) * PAGE, target.rkey());
            link.stream(0, shape.warmup(workingSet), shape.depth(), write, 120, "tlb-size");

            NodeStats before = NodeStats.read(pair.responder());
            int measured = shape.measured(workingSet);
            PeakSampler peakPinned = new PeakSampler(() -> Math.round(NodeStats.read(pair.responder()).sum(pinned, "state=pinned") - pinnedBefore),
                    20_000_000);
            long start = System.nanoTime();
            try (peakPinned) {
                link.stream(shape.warmup(workingSet), measured, shape.depth(), write, 120, "tlb-size");
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            NodeStats after = NodeStats.read(pair.responder());
            String lookups = "pagewire_tlb_lookups_total";
            double hits = after.since(before, lookups, "mode=PIN_ON_MISS", "side=destination", "transmission=first", "result=hit");
            double misses = after.since(before, lookups, "mode=PIN_ON_MISS", "side=destination", "transmission=first", "result=miss");
            return new Cell(workingSet, pattern, entries, hits + misses == 0 ? Double.NaN : hits / (hits + misses), (double) measured * PAGE / seconds / 1e6,
                    peakPinned.get(), Math.round(after.since(before, "pagewire_kernel_page_faults_total", "origin=nic", "kind=major")));
        }
    }

    /** Samples a figure on a thread of its own every {@code intervalNs} until closed, keeping the largest value seen (a last one at the close). */
    private static final class PeakSampler implements AutoCloseable {
        private final LongSupplier figure;
        private final AtomicLong peak = new AtomicLong();
        private final AtomicBoolean sampling = new AtomicBoolean(true);
        private final Thread thread;

        PeakSampler(LongSupplier figure, long intervalNs) {
            this.figure = figure;
            thread = new Thread(() -> {
                while (sampling.get()) {
                    peak.accumulateAndGet(figure.getAsLong(), Math::max);
                    LockSupport.parkNanos(intervalNs);
                }
            }, "tlb-size-pin-sampler");
            thread.setDaemon(true);
            thread.start();
        }

        long get() {
            return peak.get();
        }

        @Override
        public void close() throws InterruptedException {
            sampling.set(false);
            thread.join();
            peak.accumulateAndGet(figure.getAsLong(), Math::max);
        }
    }

    /** What one configuration measured. */
    record Cell(int workingSet, Pattern pattern, int entries, double hitRate, double megabytesPerSecond, long peakPinned, long majorFaults) {
    }

    private Cell runCell(Shape shape, int workingSet, Pattern pattern, int entries, long seed) throws Exception {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.IN_PROCESS, c -> {
            c.security().plaintext();
            c.kernel().physicalMemoryBytes(shape.physicalMemoryBytes()).swapBytes(Math.max(64L << 20, 4L * workingSet * PAGE));
            c.nic().tlbEntries(entries).tlbWays(Math.min(8, entries)).tlbIndexing(indexing).randomSeed(seed);
        })) {
            PagewireNode sender = cluster.node(1);
            PagewireNode receiver = cluster.node(2);
            Endpoint local = sender.nic().openEndpoint("tlb-size-source");
            Endpoint remote = receiver.nic().openEndpoint("tlb-size-target");
            Link link = Link.connect(sender.nic(), local, receiver.nic(), remote);

            int sourcePages = 16;
            long src = local.space().allocate((long) sourcePages * PAGE);
            local.space().store(src, new byte[sourcePages * PAGE], 0, sourcePages * PAGE);
            MemoryRegion source = local.register(src, (long) sourcePages * PAGE, RegistrationMode.PINNED, Access.all());
            long dst = remote.space().allocate((long) workingSet * PAGE);
            MemoryRegion target = remote.register(dst, (long) workingSet * PAGE, RegistrationMode.PIN_ON_MISS, Access.all());

            SplittableRandom random = new SplittableRandom(seed ^ (31L * workingSet + entries) ^ pattern.ordinal());
            link.stream(0, shape.warmup(workingSet), shape.depth(), i -> write(i, source, target, pattern.page(i, workingSet, random)), "tlb-size");

            NicCounters counters = receiver.nic().counters();
            long hits = counters.get(NicCounter.TLB_DESTINATION_FIRST_HITS, RegistrationMode.PIN_ON_MISS);
            long misses = counters.get(NicCounter.TLB_DESTINATION_FIRST_MISSES, RegistrationMode.PIN_ON_MISS);
            long major = receiver.kernel().counters().get(KernelCounter.NIC_FAULTS_MAJOR);
            int measured = shape.measured(workingSet);
            PeakSampler peakPinned = new PeakSampler(() -> receiver.kernel().stats().pinnedPages(), 200_000);
            long start = System.nanoTime();
            try (peakPinned) {
                link.stream(shape.warmup(workingSet), measured, shape.depth(), i -> write(i, source, target, pattern.page(i, workingSet, random)),
                        "tlb-size");
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            hits = counters.get(NicCounter.TLB_DESTINATION_FIRST_HITS, RegistrationMode.PIN_ON_MISS) - hits;
            misses = counters.get(NicCounter.TLB_DESTINATION_FIRST_MISSES, RegistrationMode.PIN_ON_MISS) - misses;
            return new Cell(workingSet, pattern, entries, hits + misses == 0 ? Double.NaN : hits / (double) (hits + misses),
                    (double) measured * PAGE / seconds / 1e6, peakPinned.get(), receiver.kernel().counters().get(KernelCounter.NIC_FAULTS_MAJOR) - major);
        }
    }

    /** The {@code i}-th one-page write: from one of the source's pages in turn to the page the pattern picks. */
    private static WorkRequest write(long i, MemoryRegion source, MemoryRegion target, long page) {
        long from = source.address() + (i % (source.length() / PAGE)) * PAGE;
        return WorkRequest.write(i, source.lkey(), from, PAGE, target.address() + page * PAGE, target.rkey());
    }

    private ExperimentResult result(Shape shape, List<Cell> cells) {
        List<List<Object>> rows = new ArrayList<>();
        Map<String, double[][]> series = new LinkedHashMap<>();
        boolean tlbSweeps = shape.tlbEntries().length > 1;
        for (Cell cell : cells) {
            rows.add(List.of(cell.workingSet(), cell.pattern().name().toLowerCase(Locale.ROOT), cell.entries(), 100 * cell.hitRate(),
                    cell.megabytesPerSecond(), cell.peakPinned(), cell.majorFaults()));
            String pattern = cell.pattern().name().toLowerCase(Locale.ROOT);
            if (tlbSweeps) {
                ExperimentResult.Plot.addPoint(series, pattern + ", " + cell.workingSet() + " pages", cell.entries(), 100 * cell.hitRate());
            } else {
                ExperimentResult.Plot.addPoint(series, pattern + ", " + cell.entries() + " TLB entries", cell.workingSet(), 100 * cell.hitRate());
            }
        }
        return new ExperimentResult(List.of("working set (pages)", "pattern", "TLB entries", "hit %", "MB/s", "peak pinned", "major faults"),
                rows, new ExperimentResult.Plot("tlb-size: the receiving NIC's TLB hit rate (PIN_ON_MISS, first transmissions)",
                        tlbSweeps ? "TLB entries" : "working set (pages)", "hit rate (%)", true, series),
                claims(shape, cells));
    }

    private static List<Claim> claims(Shape shape, List<Cell> cells) {
        List<Claim> claims = new ArrayList<>();
        if (shape.tlbEntries().length > 1) {
            claims.add(hitRateGrowsWithTheTlb(cells));
        } else {
            claims.add(hitRateFallsPastTheTlbsReach(cells));
        }
        claims.addAll(boundsAndSpeed(shape, cells));
        return claims;
    }

    /** 1. The hit rate does not fall as the TLB grows (random access may wobble by a point). */
    private static Claim hitRateGrowsWithTheTlb(List<Cell> cells) {
        double worstDrop = 0;
        String worstAt = "none";
        for (int i = 1; i < cells.size(); i++) {
            Cell before = cells.get(i - 1);
            Cell after = cells.get(i);
            if (before.workingSet() == after.workingSet() && before.pattern() == after.pattern()) {
                double drop = before.hitRate() - after.hitRate();
                if (drop > worstDrop) {
                    worstDrop = drop;
                    worstAt = String.format(Locale.ROOT, "%s over %d pages, %d -> %d entries", after.pattern().name().toLowerCase(Locale.ROOT),
                            after.workingSet(), before.entries(), after.entries());
                }
            }
        }
        return new Claim("the TLB's hit rate does not fall as the TLB grows", worstDrop <= 0.02,
                String.format(Locale.ROOT, "largest fall %.1f points (%s); 2 allowed for random access", 100 * worstDrop, worstAt));
    }

    /**
     * 1, with one TLB size (a running cluster's): the hit rate does not rise as the working set grows,
     * and it falls once the working set is past the TLB's reach.
     */
    private static Claim hitRateFallsPastTheTlbsReach(List<Cell> cells) {
        double worstRise = 0;
        String worstAt = "none";
        List<String> falls = new ArrayList<>();
        boolean fell = true;
        for (Pattern pattern : Pattern.values()) {
            List<Cell> sweep = cells.stream().filter(c -> c.pattern() == pattern).sorted(Comparator.comparingInt(Cell::workingSet)).toList();
            for (int i = 1; i < sweep.size(); i++) {
                double rise = sweep.get(i).hitRate() - sweep.get(i - 1).hitRate();
                if (rise > worstRise) {
                    worstRise = rise;
                    worstAt = String.format(Locale.ROOT, "%s, %d -> %d pages", pattern.name().toLowerCase(Locale.ROOT), sweep.get(i - 1).workingSet(),
                            sweep.get(i).workingSet());
                }
            }
            Cell first = sweep.get(0);
            Cell last = sweep.get(sweep.size() - 1);
            fell &= last.hitRate() < first.hitRate();
            falls.add(String.format(Locale.ROOT, "%s %.1f -> %.1f %%", pattern.name().toLowerCase(Locale.ROOT), 100 * first.hitRate(), 100 * last.hitRate()));
        }
        return new Claim("with the node's one TLB, the hit rate falls once the working set outgrows the TLB's reach, and never rises with it",
                fell && worstRise <= 0.02, String.format(Locale.ROOT, "%s over %d to %d pages; largest rise %.1f points (%s)", String.join(", ", falls),
                        cells.stream().mapToInt(Cell::workingSet).min().orElse(0), cells.stream().mapToInt(Cell::workingSet).max().orElse(0),
                        100 * worstRise, worstAt));
    }

    /** 2 to 4: pinned pages stay within the TLB, a TLB that covers the working set hits, and hits are faster. */
    private static List<Claim> boundsAndSpeed(Shape shape, List<Cell> cells) {
        List<Claim> claims = new ArrayList<>();
        // 2. Pinned pages stay within the TLB's entries, whatever the working set.
        Cell mostPinned = cells.get(0);
        for (Cell cell : cells) {
            if ((double) cell.peakPinned() / cell.entries() > (double) mostPinned.peakPinned() / mostPinned.entries()) {
                mostPinned = cell;
            }
        }
        int largest = shape.workingSetPages()[shape.workingSetPages().length - 1];
        claims.add(new Claim("the pages pinned stay within the TLB's entries, with a working set of " + largest + " pages ("
                + String.format(Locale.ROOT, "%.1fx", (double) largest * PAGE / shape.physicalMemoryBytes()) + " physical memory)",
                cells.stream().allMatch(c -> c.peakPinned() <= c.entries()),
                String.format(Locale.ROOT, "most pinned against entries: %d of %d (%s over %d pages)", mostPinned.peakPinned(), mostPinned.entries(),
                        mostPinned.pattern().name().toLowerCase(Locale.ROOT), mostPinned.workingSet())));

        // 3. Once the TLB covers the working set, nearly every lookup hits.
        double lowest = 1;
        int covered = 0;
        for (Cell cell : cells) {
            if (cell.entries() >= 2 * cell.workingSet()) {
                covered++;
                lowest = Math.min(lowest, cell.hitRate());
            }
        }
        claims.add(new Claim("once the TLB covers the working set, nearly every lookup hits", covered > 0 && lowest >= 0.9,
                covered == 0 ? "no TLB in this run covers a working set"
                        : String.format(Locale.ROOT, "lowest hit rate with entries at least twice the working set: %.1f %% (%d runs)", 100 * lowest, covered)));

        // 4. Hits pay: over working sets within physical memory (no swap I/O in either), runs that hit
        // write faster than runs that miss. With a TLB that sweeps, that is the smallest working set;
        // with one TLB, a working set it covers against one it does not.
        Predicate<Cell> inMemory = c -> (long) c.workingSet() * PAGE <= shape.physicalMemoryBytes();
        double[] hitting = cells.stream().filter(c -> inMemory.test(c) && c.hitRate() >= 0.9).mapToDouble(Cell::megabytesPerSecond).toArray();
        double[] missing = cells.stream().filter(c -> inMemory.test(c) && c.hitRate() <= 0.1).mapToDouble(Cell::megabytesPerSecond).toArray();
        double hitMean = Arrays.stream(hitting).average().orElse(Double.NaN);
        double missMean = Arrays.stream(missing).average().orElse(Double.NaN);
        claims.add(new Claim("writes whose pages hit the TLB go faster than writes that miss", hitMean > missMean,
                String.format(Locale.ROOT, "working sets within memory: %.1f MB/s on average in the %d runs hitting 90 %% or more, %.1f MB/s in the %d"
                        + " missing 90 %% or more (%.2fx); single runs here vary by tens of percent", hitMean, hitting.length, missMean, missing.length,
                        hitMean / missMean)));
        return claims;
    }
}
