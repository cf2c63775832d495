package io.pagewire.tools.cli;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.tools.experiment.NodeStats;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Collectors;

/**
 * The demo's workload, run through the public SDK: a ring of writers, each filling a region on the
 * next node that is several times that node's physical memory, with a few writes in flight. The
 * figures of each mode come from the nodes' meters (the ones `pagewire stat` and Prometheus read),
 * as the difference between before and after the run.
 */
final class Demo {
    /** The workload's shape. */
    record Workload(long workingSetBytes, int messageBytes, int depth) {
    }

    /**
     * What one mode did; {@code error} set when the mode could not run (PINNED past memlock). The TLB
     * hit rates count first transmissions only, on the pages written to (destination) and read from
     * (source); NaN where the mode has no TLB.
     */
    record Row(RegistrationMode mode, double mbPerSec, double p50Us, double p99Us, double destinationHitRate, double sourceHitRate,
            long minorFaults, long majorFaults,
            long rnrNaks, double parkedMiB, long creditWaits, double peakPinnedMiB, double seconds, String error) {
    }

    /** Times the workload writes the working set. */
    static final int PASSES = 2;

    private final List<Pagewire> nodes;
    private final Workload workload;

    Demo(List<Pagewire> nodes, Workload workload) {
        this.nodes = nodes;
        this.workload = workload;
    }

    Row run(RegistrationMode mode) throws Exception {
        int n = nodes.size();
        List<Endpoint> endpoints = new ArrayList<>();
        try {
            for (int i = 0; i < n; i++) {
                endpoints.add(nodes.get(i).openEndpoint("demo-" + mode.name().toLowerCase()));
            }
            List<MemoryRegion> targets = new ArrayList<>();
            for (Endpoint endpoint : endpoints) {
                long address = endpoint.allocate(workload.workingSetBytes());
                try {
                    targets.add(endpoint.register(address, workload.workingSetBytes(), mode, Access.all()));
                } catch (PagewireException e) {
                    return failed(mode, e.getMessage());
                }
            }
            List<List<MemoryRegion>> sources = new ArrayList<>();
            List<QueuePair> qps = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                List<MemoryRegion> mine = new ArrayList<>();
                for (int k = 0; k < workload.depth(); k++) {
                    long address = endpoints.get(i).allocate(workload.messageBytes());
                    endpoints.get(i).store(address, pattern(i * 1000L + k, workload.messageBytes()));
                    mine.add(endpoints.get(i).register(address, workload.messageBytes(), mode, Access.all()));
                }
                sources.add(mine);
                qps.add(endpoints.get(i).connect(endpoints.get((i + 1) % n)));
            }

            Map<String, Double> before = totals();
            AtomicBoolean sampling = new AtomicBoolean(true);
            double[] peakPinned = {0};
            Thread sampler = new Thread(() -> {
                while (sampling.get()) {
                    for (Pagewire node : nodes) {
                        peakPinned[0] = Math.max(peakPinned[0], gauge(node, "pagewire_pinned_memory_bytes"));
                    }
                    try {
                        Thread.sleep(25);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "demo-sampler");
            sampler.setDaemon(true);
            sampler.start();
            long start = System.nanoTime();
            ExecutorService writers = Executors.newFixedThreadPool(n);
            try {
                List<Future<?>> done = new ArrayList<>();
                for (int i = 0; i < n; i++) {
                    int writer = i;
                    done.add(writers.submit(() -> {
                        fill(qps.get(writer), sources.get(writer), targets.get((writer + 1) % n));
                        return null;
                    }));
                }
                for (Future<?> f : done) {
                    f.get();
                }
            } finally {
                writers.shutdownNow();
                sampling.set(false);
                sampler.join();
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            for (int i = 0; i < n; i++) {
                verify(endpoints.get((i + 1) % n), targets.get((i + 1) % n), i);
            }
            Map<String, Double> after = totals();
            double destinationHitRate = firstTransmissionHitRate(before, after, mode, "destination");
            double sourceHitRate = firstTransmissionHitRate(before, after, mode, "source");
            double p50 = 0;
            double p99 = 0;
            for (Pagewire node : nodes) {
                List<Pagewire.Stat> stats = node.statList();
                p50 += quantile(stats, mode, "0.5") / n;
                p99 = Math.max(p99, quantile(stats, mode, "0.99"));
            }
            return new Row(mode, PASSES * n * workload.workingSetBytes() / (double) (1 << 20) / seconds, p50 * 1e6, p99 * 1e6,
                    destinationHitRate, sourceHitRate,
                    (long) delta(before, after, "pagewire_kernel_page_faults_total{kind=minor,origin=nic}"),
                    (long) delta(before, after, "pagewire_kernel_page_faults_total{kind=major,origin=nic}"),
                    (long) delta(before, after, "pagewire_rnr_naks_sent_total{}"),
                    delta(before, after, "pagewire_system_buffer_parked_bytes_total{}") / (1 << 20),
                    (long) delta(before, after, "pagewire_credit_waits_total{}"),
                    peakPinned[0] / (1 << 20), seconds, null);
        } finally {
            for (Endpoint endpoint : endpoints) {
                endpoint.close();
            }
        }
    }

    /**
     * Writes the whole target region twice in message-sized chunks, {@code depth} in flight: the first
     * pass touches every page (minor faults), the second rewrites pages long since paged out (major).
     */
    private void fill(QueuePair qp, List<MemoryRegion> sources, MemoryRegion target) {
        ArrayDeque<CompletableFuture<Completion>> inFlight = new ArrayDeque<>();
        long chunks = workload.workingSetBytes() / workload.messageBytes();
        for (long i = 0; i < PASSES * chunks; i++) {
            long c = i % chunks;
            if (inFlight.size() == workload.depth()) {
                qp.await(inFlight.poll());
            }
            MemoryRegion src = sources.get((int) (c % sources.size()));
            inFlight.add(qp.write(src, src.address(), workload.messageBytes(), target.address() + c * workload.messageBytes(), target.rkey()));
        }
        while (!inFlight.isEmpty()) {
            qp.await(inFlight.poll());
        }
    }

    /** Reads back the last chunks writer {@code writer} put in the target (through the target's CPU path). */
    private void verify(Endpoint owner, MemoryRegion target, int writer) {
        long chunks = workload.workingSetBytes() / workload.messageBytes();
        for (long c = Math.max(0, chunks - workload.depth()); c < chunks; c++) {
            byte[] landed = owner.load(target.address() + c * workload.messageBytes(), workload.messageBytes());
            byte[] expected = pattern(writer * 1000L + c % workload.depth(), workload.messageBytes());
            if (!Arrays.equals(landed, expected)) {
                throw new IllegalStateException("chunk " + c + " of " + target + " does not hold what was written");
            }
        }
    }

    private Row failed(RegistrationMode mode, String error) {
        return new Row(mode, 0, 0, 0, Double.NaN, Double.NaN, 0, 0, 0, 0, 0, 0, 0, error);
    }

    /** Every counter summed over the nodes, keyed "name{tags}". */
    private Map<String, Double> totals() {
        Map<String, Double> totals = new HashMap<>();
        for (Pagewire node : nodes) {
            for (Pagewire.Stat stat : node.statList()) {
                if (stat.counter()) {
                    totals.merge(key(stat), stat.value(), Double::sum);
                }
            }
        }
        return totals;
    }

    private static String key(Pagewire.Stat stat) {
        return stat.name() + stat.tags().entrySet().stream().sorted(Map.Entry.comparingByKey()).map(e -> e.getKey() + "=" + e.getValue())
                .collect(Collectors.joining(",", "{", "}"));
    }

    /** Hits over lookups of the TLB on one side's pages, first transmissions only; NaN with no lookup. */
    private static double firstTransmissionHitRate(Map<String, Double> before, Map<String, Double> after, RegistrationMode mode, String side) {
        String tags = "{mode=" + mode + ",result=%s,side=" + side + ",transmission=first}";
        double hits = delta(before, after, "pagewire_tlb_lookups_total" + String.format(Locale.ROOT, tags, "hit"));
        double misses = delta(before, after, "pagewire_tlb_lookups_total" + String.format(Locale.ROOT, tags, "miss"));
        return hits + misses == 0 ? Double.NaN : hits / (hits + misses);
    }

    private static double delta(Map<String, Double> before, Map<String, Double> after, String key) {
        return after.getOrDefault(key, 0.0) - before.getOrDefault(key, 0.0);
    }

    private static double gauge(Pagewire node, String name) {
        return NodeStats.read(node).sum(name);
    }

    private static double quantile(List<Pagewire.Stat> stats, RegistrationMode mode, String q) {
        return stats.stream()
                .filter(s -> s.name().equals("pagewire_operation_latency_seconds") && "write".equals(s.tags().get("op"))
                        && mode.name().equals(s.tags().get("mode")) && q.equals(s.tags().get("quantile")))
                .mapToDouble(Pagewire.Stat::value).findFirst().orElse(0);
    }

    static byte[] pattern(long seed, int length) {
        byte[] bytes = new byte[length];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }
}
