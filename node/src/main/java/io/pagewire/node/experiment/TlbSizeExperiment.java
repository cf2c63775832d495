package io.pagewire.node.experiment;

import io.pagewire.kernel.KernelCounter;
import io.pagewire.node.EmbeddedCluster;
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
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * {@code tlb-size} (U-Net/MM): a NIC whose receive-side TLB pins what it maps. One node writes
 * single pages into a PIN_ON_MISS region of another, page after page in a sequential, strided or
 * random order over a working set that fits the TLB's reach or exceeds even physical memory, for
 * TLB sizes from 16 entries up; it measures the destination's hit rate (first transmissions), the
 * write throughput and the most pages the kernel held pinned at once.
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
    public Optional<String> needsOwnNodes() {
        return Optional.of("it sets the NIC TLB's size, from 16 to 4,096 entries, on nodes it starts for each run");
    }

    @Override
    public String paper() {
        return "U-Net/MM (Welsh, Basu and von Eicken, 1997) puts a TLB on the NIC and has the kernel pin a page while it is in that TLB: "
                + "the hit rate grows with the TLB's size and is high once the TLB covers the working set, and the pages pinned stay "
                + "bounded by the TLB's entries however large the working set grows, past physical memory too.";
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
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
            Link link = Link.connect(local, remote);

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
            AtomicLong peakPinned = new AtomicLong();
            AtomicBoolean sampling = new AtomicBoolean(true);
            Thread sampler = new Thread(() -> {
                while (sampling.get()) {
                    peakPinned.accumulateAndGet(receiver.kernel().stats().pinnedPages(), Math::max);
                    LockSupport.parkNanos(200_000);
                }
            }, "tlb-size-pin-sampler");
            sampler.setDaemon(true);
            sampler.start();
            int measured = shape.measured(workingSet);
            long start = System.nanoTime();
            try {
                link.stream(shape.warmup(workingSet), measured, shape.depth(), i -> write(i, source, target, pattern.page(i, workingSet, random)),
                        "tlb-size");
            } finally {
                sampling.set(false);
                sampler.join();
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            peakPinned.accumulateAndGet(receiver.kernel().stats().pinnedPages(), Math::max);
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
        for (Cell cell : cells) {
            rows.add(List.of(cell.workingSet(), cell.pattern().name().toLowerCase(Locale.ROOT), cell.entries(), 100 * cell.hitRate(),
                    cell.megabytesPerSecond(), cell.peakPinned(), cell.majorFaults()));
            ExperimentResult.Plot.addPoint(series, cell.pattern().name().toLowerCase(Locale.ROOT) + ", " + cell.workingSet() + " pages",
                    cell.entries(), 100 * cell.hitRate());
        }
        return new ExperimentResult(List.of("working set (pages)", "pattern", "TLB entries", "hit %", "MB/s", "peak pinned", "major faults"),
                rows, new ExperimentResult.Plot("tlb-size: the receiving NIC's TLB hit rate (PIN_ON_MISS, first transmissions)",
                        "TLB entries", "hit rate (%)", true, series),
                claims(shape, cells));
    }

    private static List<Claim> claims(Shape shape, List<Cell> cells) {
        List<Claim> claims = new ArrayList<>();
        // 1. The hit rate does not fall as the TLB grows (random access may wobble by a point).
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
        claims.add(new Claim("the TLB's hit rate does not fall as the TLB grows", worstDrop <= 0.02,
                String.format(Locale.ROOT, "largest fall %.1f points (%s); 2 allowed for random access", 100 * worstDrop, worstAt)));

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

        // 4. Hits pay: over the working set within reach, runs that hit write faster than runs that miss.
        int smallest = shape.workingSetPages()[0];
        double[] hitting = cells.stream().filter(c -> c.workingSet() == smallest && c.hitRate() >= 0.9).mapToDouble(Cell::megabytesPerSecond).toArray();
        double[] missing = cells.stream().filter(c -> c.workingSet() == smallest && c.hitRate() <= 0.1).mapToDouble(Cell::megabytesPerSecond).toArray();
        double hitMean = java.util.Arrays.stream(hitting).average().orElse(Double.NaN);
        double missMean = java.util.Arrays.stream(missing).average().orElse(Double.NaN);
        claims.add(new Claim("writes whose pages hit the TLB go faster than writes that miss", hitMean > missMean,
                String.format(Locale.ROOT, "over %d pages: %.1f MB/s on average in the %d runs hitting 90 %% or more, %.1f MB/s in the %d missing"
                        + " 90 %% or more (%.2fx); single runs here vary by tens of percent", smallest, hitMean, hitting.length, missMean, missing.length,
                        hitMean / missMean)));
        return claims;
    }
}
