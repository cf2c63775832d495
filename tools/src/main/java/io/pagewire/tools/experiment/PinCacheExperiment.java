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
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.tools.perf.Perftest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.function.LongFunction;
import java.util.function.LongUnaryOperator;
import java.util.stream.IntStream;

/**
 * {@code pin-cache} (NetVM against a dynamic pinning cache): an application receives into buffers
 * drawn from a pool, reusing some more than others (eight in ten writes go to a fifth of the pool,
 * as applications reuse their communication buffers), for pools smaller and larger than the NIC's
 * cache. PIN_ON_MISS is a pin-down cache (U-Net/MM's TLB, or an MPI registration cache): a buffer
 * page is pinned at its first use, stays pinned while cached and is unpinned when evicted. SHADOW
 * (NetVM) pins nothing: its shadow page table follows the kernel's page tables. A pin and an unpin
 * each cost the receiving node {@link #PIN_COST_NS} of CPU time per page, as they would a kernel
 * (get_user_pages and the NIC's table update), so that what the misses cost shows in throughput.
 * Against a running cluster the pools are sized from the receiving node's TLB, and a pin costs what
 * that node was configured with ({@code pagewire.kernel.pinCostNs}).
 */
public final class PinCacheExperiment implements Experiment {
    private static final int PAGE = 4096;
    /**
     * CPU time per page pinned or unpinned on the receiving node: a few microseconds, between a kernel's
     * own pin of a page (about one) and a small ibv_reg_mr with its system call (tens).
     */
    static final long PIN_COST_NS = 5_000;

    /** How big a run is: the cache (TLB entries), the pools (pages), writes measured. */
    record Shape(int cacheEntries, int[] poolPages, int writes, int depth) {
    }

    static final Shape DEFAULT = new Shape(512, new int[] {128, 1024, 4096, 16384}, 40_000, 8);
    static final Shape REDUCED = new Shape(128, new int[] {32, 1024}, 5_000, 8);

    private static final RegistrationMode[] MODES = {RegistrationMode.PIN_ON_MISS, RegistrationMode.SHADOW};

    @Override
    public String name() {
        return "pin-cache";
    }

    @Override
    public String paper() {
        return "NetVM (Huang, 2009) against a dynamic pinning cache: the cache's hit rate can be high when applications reuse buffers "
                + "(up to 94.5 %), but every miss pins and unpins a page in the kernel; the shadow page table pins nothing, whatever the reuse.";
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        if (settings.cluster() != null) {
            return runOnCluster(settings, progress);
        }
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        return runPools(shape, PIN_COST_NS, progress, (pool, mode) -> runPool(shape, pool, mode, settings.seed()));
    }

    /**
     * The pools on two nodes of a running cluster, sized from the receiving node's TLB (pools of a
     * quarter of it to 32 times it, as far as half its memory allows; reduced, a quarter and 8 times),
     * at the pin cost it was configured with.
     */
    private ExperimentResult runOnCluster(ExperimentSettings settings, PrintWriter progress) throws Exception {
        try (ApplicationPair pair = ApplicationPair.open(settings)) {
            NodeStats node = NodeStats.read(pair.responder());
            int cache = (int) node.sum("pagewire_tlb_entries", "state=capacity");
            long pinCostNs = Math.round(node.sum("pagewire_kernel_pin_cost_seconds") * 1e9);
            int fit = (int) Math.min(Integer.MAX_VALUE / PAGE, pair.responder().node().physicalMemoryBytes() / 2 / PAGE);
            Shape base = settings.reduced() ? REDUCED : DEFAULT;
            int[] pools = IntStream.of(Math.max(1, cache / 4), 2 * cache, 8 * cache, 32 * cache).map(p -> Math.min(p, fit))
                    .distinct().toArray();
            Shape shape = new Shape(cache, settings.reduced() ? new int[] {pools[0], pools[Math.min(2, pools.length - 1)]} : pools, base.writes(), base.depth());
            progress.printf(Locale.ROOT, "pin-cache: %s; its TLB has %d entries, a pin costs it %.1f us%n", pair.where(), cache, pinCostNs / 1e3);
            progress.flush();
            return runPools(shape, pinCostNs, progress, (pool, mode) -> runPoolOnCluster(pair, shape, pool, mode, settings.seed()));
        }
    }

    /** Measures one pool in one mode. */
    @FunctionalInterface
    private interface PoolRunner {
        Run run(int pool, RegistrationMode mode) throws Exception;
    }

    private static ExperimentResult runPools(Shape shape, long pinCostNs, PrintWriter progress, PoolRunner runner) throws Exception {
        progress.println("pin-cache: warming up ...");
        progress.flush();
        for (RegistrationMode mode : MODES) {
            runner.run(shape.poolPages()[0], mode);
        }
        List<Run> runs = new ArrayList<>();
        for (int pool : shape.poolPages()) {
            for (RegistrationMode mode : MODES) {
                progress.printf(Locale.ROOT, "pin-cache: a pool of %d pages against a cache of %d, %s ...%n", pool, shape.cacheEntries(), mode);
                progress.flush();
                runs.add(runner.run(pool, mode));
            }
        }
        return result(shape, pinCostNs, runs);
    }

    /** What one pool and mode measured on the receiving node. */
    record Run(int poolPages, RegistrationMode mode, double hitRate, long pins, long unpins, double stallSeconds, double megabytesPerSecond) {
    }

    private Run runPool(Shape shape, int pool, RegistrationMode mode, long seed) throws Exception {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.IN_PROCESS, c -> {
            c.security().plaintext();
            c.nic().tlbEntries(shape.cacheEntries()).randomSeed(seed);
            c.kernel().pinCostNs(PIN_COST_NS);
        })) {
            PagewireNode sender = cluster.node(1);
            PagewireNode receiver = cluster.node(2);
            Endpoint writer = sender.nic().openEndpoint("pin-cache-writer");
            Endpoint owner = receiver.nic().openEndpoint("pin-cache-receiver");
            Link link = Link.connect(sender.nic(), writer, receiver.nic(), owner);
            long src = writer.space().allocate(PAGE);
            writer.space().store(src, new byte[PAGE], 0, PAGE);
            MemoryRegion source = writer.register(src, PAGE, RegistrationMode.PINNED, Access.all());
            long dst = owner.space().allocate((long) pool * PAGE);
            owner.space().store(dst, new byte[pool * PAGE], 0, pool * PAGE); // the application's buffers exist before it receives
            MemoryRegion buffers = owner.register(dst, (long) pool * PAGE, mode, Access.all());

            LongUnaryOperator pages = reusedPages(pool, seed);
            // One pass over the pool first: every buffer's first use is a compulsory miss in any cache.
            link.stream(0, pool, shape.depth(), i -> write(i, source, buffers, i), "pin-cache");
            NicCounters counters = receiver.nic().counters();
            long hits = counters.get(NicCounter.TLB_DESTINATION_FIRST_HITS, RegistrationMode.PIN_ON_MISS);
            long misses = counters.get(NicCounter.TLB_DESTINATION_FIRST_MISSES, RegistrationMode.PIN_ON_MISS);
            long pins = receiver.kernel().counters().get(KernelCounter.PINS);
            long unpins = receiver.kernel().counters().get(KernelCounter.UNPINS);
            long stall = counters.get(NicCounter.RECEIVE_STALL_NANOS, RegistrationMode.PIN_ON_MISS);
            long start = System.nanoTime();
            link.stream(0, shape.writes(), shape.depth(), i -> write(i, source, buffers, pages.applyAsLong(i)), "pin-cache");
            double seconds = (System.nanoTime() - start) / 1e9;
            long h = counters.get(NicCounter.TLB_DESTINATION_FIRST_HITS, RegistrationMode.PIN_ON_MISS) - hits;
            long m = counters.get(NicCounter.TLB_DESTINATION_FIRST_MISSES, RegistrationMode.PIN_ON_MISS) - misses;
            // SHADOW has no cache to hit: its table holds every resident page.
            return new Run(pool, mode, mode == RegistrationMode.SHADOW || h + m == 0 ? Double.NaN : h / (double) (h + m), receiver.kernel().counters().get(KernelCounter.PINS) - pins,
                    receiver.kernel().counters().get(KernelCounter.UNPINS) - unpins,
                    (counters.get(NicCounter.RECEIVE_STALL_NANOS, RegistrationMode.PIN_ON_MISS) - stall) / 1e9,
                    (double) shape.writes() * PAGE / seconds / 1e6);
        }
    }

    /** The same pool and mode on two nodes of a running cluster, through the SDK, its counters read from the receiving node's meters. */
    private static Run runPoolOnCluster(ApplicationPair pair, Shape shape, int pool, RegistrationMode mode, long seed) throws Exception {
        try (ClusterLink link = ClusterLink.open(pair.requester(), pair.responder(), "pin-cache", PAGE)) {
            io.pagewire.client.Endpoint owner = link.receiver();
            long dst = owner.allocate((long) pool * PAGE);
            Perftest.touch(owner, dst, (long) pool * PAGE); // the application's buffers exist before it receives
            io.pagewire.client.MemoryRegion buffers = owner.register(dst, (long) pool * PAGE, io.pagewire.client.RegistrationMode.valueOf(mode.name()),
                    io.pagewire.client.Access.all());
            io.pagewire.client.MemoryRegion source = link.source();
            LongFunction<io.pagewire.client.WorkRequest> write = page -> io.pagewire.client.WorkRequest.write(source, source.address(), PAGE,
                    dst + page * PAGE, buffers.rkey());
            LongUnaryOperator pages = reusedPages(pool, seed);
            link.stream(0, pool, shape.depth(), write, 120, "pin-cache");
            NodeStats before = NodeStats.read(pair.responder());
            long start = System.nanoTime();
            link.stream(0, shape.writes(), shape.depth(), i -> write.apply(pages.applyAsLong(i)), 120, "pin-cache");
            double seconds = (System.nanoTime() - start) / 1e9;
            NodeStats after = NodeStats.read(pair.responder());
            String lookups = "pagewire_tlb_lookups_total";
            double h = after.since(before, lookups, "mode=PIN_ON_MISS", "side=destination", "transmission=first", "result=hit");
            double m = after.since(before, lookups, "mode=PIN_ON_MISS", "side=destination", "transmission=first", "result=miss");
            return new Run(pool, mode, mode == RegistrationMode.SHADOW || h + m == 0 ? Double.NaN : h / (h + m),
                    (long) after.since(before, "pagewire_pins_total"), (long) after.since(before, "pagewire_unpins_total"),
                    after.since(before, "pagewire_receive_stall_seconds_total"), (double) shape.writes() * PAGE / seconds / 1e6);
        }
    }

    /**
     * Which pool page each measured write goes to: eight in ten to the first fifth of the pool, the
     * rest to the others, drawn from {@code seed} (the same sequence in every mode).
     */
    private static LongUnaryOperator reusedPages(int pool, long seed) {
        SplittableRandom random = new SplittableRandom(seed ^ pool);
        int hot = Math.max(1, pool / 5);
        return i -> random.nextInt(10) < 8 ? random.nextInt(hot) : hot + random.nextInt(Math.max(1, pool - hot));
    }

    /** A one-page write from the source page to page {@code page} of the pool. */
    private static WorkRequest write(long id, MemoryRegion source, MemoryRegion buffers, long page) {
        return WorkRequest.write(id, source.lkey(), source.address(), PAGE, buffers.address() + page * PAGE, buffers.rkey());
    }

    private static ExperimentResult result(Shape shape, long pinCostNs, List<Run> runs) {
        List<List<Object>> rows = new ArrayList<>();
        Map<String, double[][]> series = new LinkedHashMap<>();
        for (Run r : runs) {
            rows.add(List.of(r.poolPages(), r.mode().name(), Double.isNaN(r.hitRate()) ? "-" : String.format(Locale.ROOT, "%.1f", 100 * r.hitRate()),
                    r.pins(), r.unpins(), r.stallSeconds(), r.megabytesPerSecond()));
            if (r.mode() == RegistrationMode.PIN_ON_MISS) {
                ExperimentResult.Plot.addPoint(series, "PIN_ON_MISS: hit rate (%)", r.poolPages(), 100 * r.hitRate());
            }
            ExperimentResult.Plot.addPoint(series, r.mode() + ": pins per 100 writes", r.poolPages(), 100.0 * r.pins() / shape.writes());
        }
        List<Run> cache = runs.stream().filter(r -> r.mode() == RegistrationMode.PIN_ON_MISS).toList();
        List<Run> shadow = runs.stream().filter(r -> r.mode() == RegistrationMode.SHADOW).toList();
        Run fits = cache.get(0);
        Run largest = cache.get(cache.size() - 1);
        Run largestShadow = shadow.get(shadow.size() - 1);
        double best = cache.stream().mapToDouble(Run::hitRate).max().orElse(Double.NaN);
        List<Claim> claims = List.of(
                new Claim("a pinning cache hits often when buffers are reused (NetVM saw up to 94.5 %)", best >= 0.9,
                        String.format(Locale.ROOT, "%.1f %% with a pool of %d pages in a cache of %d; %.1f %% with %d pages", 100 * fits.hitRate(),
                                fits.poolPages(), shape.cacheEntries(), 100 * largest.hitRate(), largest.poolPages())),
                new Claim("every miss of the cache costs a pin and, once it is full, an unpin", cache.stream().allMatch(r ->
                        r.pins() >= Math.round((1 - r.hitRate()) * shape.writes()) && (r.poolPages() <= shape.cacheEntries() || r.unpins() > 0)),
                        String.join("; ", cache.stream().map(r -> String.format(Locale.ROOT, "%d pages: %d pins, %d unpins for %.0f misses",
                                r.poolPages(), r.pins(), r.unpins(), (1 - r.hitRate()) * shape.writes())).toList())),
                new Claim("the shadow page table pins nothing, whatever the reuse", shadow.stream().allMatch(r -> r.pins() == 0),
                        String.join("; ", shadow.stream().map(r -> String.format(Locale.ROOT, "%d pages: %d pins", r.poolPages(), r.pins())).toList())),
                new Claim("once buffers outgrow the cache its pins cost throughput: the shadow page table receives faster",
                        largestShadow.megabytesPerSecond() > largest.megabytesPerSecond(),
                        String.format(Locale.ROOT, "%d pages: %.0f MB/s under SHADOW, %.0f MB/s under PIN_ON_MISS (%.2f s of pins and unpins at %.1f us"
                                + " each)", largest.poolPages(), largestShadow.megabytesPerSecond(), largest.megabytesPerSecond(),
                                (largest.pins() + largest.unpins()) * pinCostNs / 1e9, pinCostNs / 1e3)));
        return new ExperimentResult(List.of("pool (pages)", "mode", "hit %", "pins", "unpins", "stall s", "MB/s"), rows,
                new ExperimentResult.Plot("pin-cache: a pinning cache of " + shape.cacheEntries() + " entries against the shadow page table",
                        "pool of buffer pages", "% (hit rate; pins per 100 writes)", true, series),
                claims);
    }
}
