package io.pagewire.node.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.distribution.CountAtBucket;
import io.pagewire.kernel.FaultKind;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelCounter;
import io.pagewire.kernel.KernelCounters;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.fabric.FaultInjector;
import io.pagewire.node.fabric.LinkStats;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionStatus;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicCounters;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.Side;
import io.pagewire.node.nic.WaitCause;
import io.pagewire.proto.verbs.Stat;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToDoubleFunction;

/**
 * Binds a node's counters and gauges to a Micrometer registry, one meter per {@link Metric}
 * definition (split by the tags the definition lists), and reads them back for `pagewire stat` and
 * the demo: the same meters Prometheus scrapes.
 */
public final class NodeMetrics {
    private final MeterRegistry registry;
    /** Latency meters by operation and local registration mode (the last column: no mode, as for FETCH_ADD). */
    private final Timer[][] latency = new Timer[Completion.Opcode.values().length][RegistrationMode.values().length + 1];
    /** Fault service meters by origin and kind. */
    private final Timer[][] faultService = new Timer[Side.values().length][FaultKind.values().length];

    private NodeMetrics(MeterRegistry registry) {
        this.registry = registry;
    }

    /** Registers every meter of a node's kernel, NIC and fabric (the registry carries the {@code node} tag). */
    public static NodeMetrics bind(MeterRegistry registry, KernelAgent kernel, Nic nic, Fabric fabric) {
        NodeMetrics metrics = new NodeMetrics(registry);
        metrics.bindNic(nic);
        metrics.bindKernel(kernel);
        metrics.bindFabric(fabric, nic);
        return metrics;
    }

    public MeterRegistry registry() {
        return registry;
    }

    private void bindNic(Nic nic) {
        NicCounters c = nic.counters();
        for (RegistrationMode mode : RegistrationMode.values()) {
            Tags m = Tags.of("mode", mode.name());
            counter(Metric.TLB_HITS, c, x -> x.get(NicCounter.TLB_HITS, mode), m);
            counter(Metric.TLB_MISSES, c, x -> x.get(NicCounter.TLB_MISSES, mode), m);
            for (boolean destination : new boolean[] {false, true}) {
                for (boolean again : new boolean[] {false, true}) {
                    for (boolean miss : new boolean[] {false, true}) {
                        NicCounter lookups = NicCounter.tlbLookup(destination, again, miss);
                        counter(Metric.TLB_LOOKUPS, c, x -> x.get(lookups, mode), Tags.of("mode", mode.name(), "side", destination ? "destination" : "source",
                                "transmission", again ? "retransmission" : "first", "result", miss ? "miss" : "hit"));
                    }
                }
            }
            counter(Metric.TLB_EVICTIONS, c, x -> x.get(NicCounter.TLB_EVICTIONS, mode), m);
            counter(Metric.PARKED_PARTS, c, x -> x.get(NicCounter.PARKED_PARTS, mode), m);
            faults(c, mode, "send", "minor", NicCounter.SEND_FAULTS_MINOR);
            faults(c, mode, "send", "major", NicCounter.SEND_FAULTS_MAJOR);
            faults(c, mode, "receive", "minor", NicCounter.RECEIVE_FAULTS_MINOR);
            faults(c, mode, "receive", "major", NicCounter.RECEIVE_FAULTS_MAJOR);
            faults(c, mode, "receive_buffer", "minor", NicCounter.RECEIVE_BUFFER_FAULTS_MINOR);
            faults(c, mode, "receive_buffer", "major", NicCounter.RECEIVE_BUFFER_FAULTS_MAJOR);
            faults(c, mode, "prefetch", "minor", NicCounter.PREFETCH_FAULTS_MINOR);
            faults(c, mode, "prefetch", "major", NicCounter.PREFETCH_FAULTS_MAJOR);
        }
        for (Side side : Side.values()) {
            for (FaultKind kind : FaultKind.values()) {
                faultService[side.ordinal()][kind.ordinal()] = histogram(Metric.FAULT_SERVICE_TIME,
                        Tags.of("origin", side.tag(), "kind", kind.name().toLowerCase(Locale.ROOT)));
            }
        }
        nic.observeFaults((side, kind, mode, serviceNs) ->
                faultService[side.ordinal()][kind.ordinal()].record(serviceNs, java.util.concurrent.TimeUnit.NANOSECONDS));
        Timer[] waits = new Timer[WaitCause.values().length];
        for (WaitCause cause : WaitCause.values()) {
            waits[cause.ordinal()] = histogram(Metric.NIC_WAIT_TIME, Tags.of("cause", cause.tag()));
        }
        nic.observeWaits((cause, nanos) -> waits[cause.ordinal()].record(nanos, java.util.concurrent.TimeUnit.NANOSECONDS));
        counter(Metric.INVALIDATED_TRANSLATIONS, c, x -> x.get(NicCounter.INVALIDATED_TRANSLATIONS), Tags.empty());
        counter(Metric.PREFETCHED_PAGES, c, x -> x.get(NicCounter.PREFETCHED_PAGES), Tags.empty());
        counter(Metric.RNR_NAKS_SENT, c, x -> x.get(NicCounter.RNR_NAKS_SENT), Tags.empty());
        counter(Metric.RNR_NAKS_RECEIVED, c, x -> x.get(NicCounter.RNR_NAKS_RECEIVED), Tags.empty());
        counter(Metric.RECEIVES_COMPLETED, c, x -> x.get(NicCounter.RECEIVES_COMPLETED), Tags.empty());
        counter(Metric.RECEIVE_STALL, c, x -> x.get(NicCounter.RECEIVE_STALL_NANOS) / 1e9, Tags.empty());
        counter(Metric.RECEIVE_RNR_NAKS_SENT, c, x -> x.get(NicCounter.NO_RECEIVE_RNR_NAKS_SENT), Tags.of("cause", "no_receive"));
        counter(Metric.RECEIVE_RNR_NAKS_SENT, c, x -> x.get(NicCounter.RECEIVE_BUFFER_RNR_NAKS_SENT), Tags.of("cause", "buffer_fault"));
        counter(Metric.RECEIVE_BUFFER_PARKED_PARTS, c, x -> x.get(NicCounter.RECEIVE_BUFFER_PARKED_PARTS), Tags.empty());
        counter(Metric.RETRANSMITTED_PACKETS, c, x -> x.get(NicCounter.RETRANSMITTED_PACKETS), Tags.empty());
        counter(Metric.ACK_TIMEOUTS, c, x -> x.get(NicCounter.ACK_TIMEOUTS), Tags.empty());
        counter(Metric.SEQUENCE_NAKS_SENT, c, x -> x.get(NicCounter.SEQUENCE_NAKS_SENT), Tags.empty());
        counter(Metric.SEQUENCE_NAKS_RECEIVED, c, x -> x.get(NicCounter.SEQUENCE_NAKS_RECEIVED), Tags.empty());
        counter(Metric.DUPLICATE_PACKETS, c, x -> x.get(NicCounter.DUPLICATE_PACKETS), Tags.empty());
        counter(Metric.OUT_OF_ORDER_PACKETS, c, x -> x.get(NicCounter.OUT_OF_ORDER_PACKETS), Tags.empty());
        counter(Metric.DROPPED_PACKETS, c, x -> x.get(NicCounter.DROPPED_PACKETS), Tags.empty());
        counter(Metric.CREDIT_WAITS, c, x -> x.get(NicCounter.CREDIT_WAITS), Tags.empty());
        counter(Metric.LINK_WAITS, c, x -> x.get(NicCounter.LINK_WAITS), Tags.empty());
        counter(Metric.RATE_LIMIT_WAITS, c, x -> x.get(NicCounter.RATE_LIMIT_WAITS), Tags.empty());
        counter(Metric.NOTIFICATIONS, c, x -> x.get(NicCounter.NOTIFICATIONS_DELIVERED), Tags.empty());
        for (CompletionStatus status : CompletionStatus.values()) {
            counter(Metric.COMPLETIONS, c, x -> x.completions(status), Tags.of("status", status.name()));
        }
        for (Completion.Opcode op : Completion.Opcode.values()) {
            if (op == Completion.Opcode.RECV || op == Completion.Opcode.RECV_RDMA_WITH_IMM) {
                continue; // a receive is not timed from a post: it waits for whenever the peer sends
            }
            if (op == Completion.Opcode.FETCH_ADD || op == Completion.Opcode.COMPARE_SWAP) {
                latency[op.ordinal()][RegistrationMode.values().length] = latencyTimer(op, "none");
            } else {
                for (RegistrationMode mode : RegistrationMode.values()) {
                    latency[op.ordinal()][mode.ordinal()] = latencyTimer(op, mode.name());
                }
            }
        }
        // Runs for every completion: an array lookup, no allocation.
        nic.observeCompletions((opcode, mode, status, bytes, latencyNs) -> {
            if (status == CompletionStatus.SUCCESS) {
                Timer timer = latency[opcode.ordinal()][mode == null ? RegistrationMode.values().length : mode.ordinal()];
                if (timer != null) {
                    timer.record(latencyNs, java.util.concurrent.TimeUnit.NANOSECONDS);
                }
            }
        });
        gauge(Metric.TLB_ENTRIES, nic, Nic::tlbValidEntries, Tags.of("state", "valid"));
        gauge(Metric.TLB_ENTRIES, nic, Nic::tlbPinnedEntries, Tags.of("state", "pinned"));
        gauge(Metric.TLB_ENTRIES, nic, Nic::tlbEntries, Tags.of("state", "capacity"));
        gauge(Metric.SHADOW_ENTRIES, nic, Nic::shadowEntries, Tags.empty());
        gauge(Metric.QUEUE_PAIRS, nic, n -> n.queuePairs().size(), Tags.empty());
        gauge(Metric.ENDPOINTS, nic, n -> n.endpoints().size(), Tags.empty());
        gauge(Metric.RECEIVE_CREDITS, nic, Nic::creditsGranted, Tags.of("state", "granted"));
        gauge(Metric.RECEIVE_CREDITS, nic, Nic::creditsTotal, Tags.of("state", "total"));
    }

    private void faults(NicCounters c, RegistrationMode mode, String side, String kind, NicCounter counter) {
        counter(Metric.NIC_PAGE_FAULTS, c, x -> x.get(counter, mode), Tags.of("mode", mode.name(), "side", side, "kind", kind));
    }

    private void bindKernel(KernelAgent kernel) {
        KernelCounters k = kernel.counters();
        counter(Metric.KERNEL_PAGE_FAULTS, k, x -> x.get(KernelCounter.CPU_FAULTS_MINOR), Tags.of("origin", "cpu", "kind", "minor"));
        counter(Metric.KERNEL_PAGE_FAULTS, k, x -> x.get(KernelCounter.CPU_FAULTS_MAJOR), Tags.of("origin", "cpu", "kind", "major"));
        counter(Metric.KERNEL_PAGE_FAULTS, k, x -> x.get(KernelCounter.NIC_FAULTS_MINOR), Tags.of("origin", "nic", "kind", "minor"));
        counter(Metric.KERNEL_PAGE_FAULTS, k, x -> x.get(KernelCounter.NIC_FAULTS_MAJOR), Tags.of("origin", "nic", "kind", "major"));
        counter(Metric.SWAP_INS, k, x -> x.get(KernelCounter.SWAP_INS), Tags.empty());
        counter(Metric.SWAP_OUTS, k, x -> x.get(KernelCounter.SWAP_OUTS), Tags.empty());
        counter(Metric.EVICTIONS, k, x -> x.get(KernelCounter.EVICTIONS), Tags.empty());
        counter(Metric.KERNEL_INVALIDATIONS, k, x -> x.get(KernelCounter.INVALIDATIONS), Tags.empty());
        counter(Metric.PINS, k, x -> x.get(KernelCounter.PINS), Tags.empty());
        counter(Metric.UNPINS, k, x -> x.get(KernelCounter.UNPINS), Tags.empty());
        counter(Metric.PIN_LIMIT_REJECTIONS, k, x -> x.get(KernelCounter.PIN_LIMIT_REJECTIONS), Tags.empty());
        counter(Metric.OUT_OF_MEMORY, k, x -> x.get(KernelCounter.OUT_OF_MEMORY), Tags.empty());
        counter(Metric.STALE_TRANSLATIONS, k, x -> x.get(KernelCounter.STALE_TRANSLATIONS), Tags.empty());
        counter(Metric.SYSTEM_BUFFER_PARKED, k, x -> x.get(KernelCounter.SYSTEM_BUFFER_PARKED_BYTES), Tags.empty());
        gauge(Metric.MEMORY_PAGES, kernel, x -> x.stats().residentPages(), Tags.of("state", "resident"));
        gauge(Metric.MEMORY_PAGES, kernel, x -> x.stats().freeFrames(), Tags.of("state", "free"));
        gauge(Metric.MEMORY_PAGES, kernel, x -> x.stats().swappedPages(), Tags.of("state", "swapped"));
        gauge(Metric.MEMORY_PAGES, kernel, x -> x.stats().pinnedPages(), Tags.of("state", "pinned"));
        gauge(Metric.PINNED_MEMORY, kernel, x -> x.stats().pinnedBytes(), Tags.empty());
        gauge(Metric.MEMLOCK_LIMIT, kernel, x -> x.context().memlockLimitBytes(), Tags.empty());
        gauge(Metric.NODE_PIN_LIMIT, kernel, x -> x.context().nodePinLimitBytes(), Tags.empty());
        gauge(Metric.KERNEL_PIN_COST, kernel, x -> x.context().pinCostNs() / 1e9, Tags.empty());
        gauge(Metric.PHYSICAL_MEMORY, kernel, x -> x.context().physicalMemoryBytes(), Tags.empty());
        gauge(Metric.SWAP_CAPACITY, kernel, x -> x.context().swapBytes(), Tags.empty());
        gauge(Metric.SYSTEM_BUFFER_USED, kernel, x -> (double) x.systemBuffer().slotsInUse() * x.systemBuffer().slotBytes(), Tags.empty());
        gauge(Metric.SYSTEM_BUFFER_PEAK, kernel, x -> (double) x.systemBuffer().peakSlotsInUse() * x.systemBuffer().slotBytes(), Tags.empty());
        gauge(Metric.SYSTEM_BUFFER_CAPACITY, kernel, x -> (double) x.systemBuffer().slotCount() * x.systemBuffer().slotBytes(), Tags.empty());
        gauge(Metric.FAULT_QUEUE_DEPTH, kernel, x -> x.faultService().depth(), Tags.empty());
    }

    private void bindFabric(Fabric fabric, Nic nic) {
        FaultInjector faults = fabric.faults();
        counter(Metric.INJECTED_FAULTS, faults, FaultInjector::dropped, Tags.of("kind", "loss"));
        counter(Metric.INJECTED_FAULTS, faults, FaultInjector::duplicated, Tags.of("kind", "duplicate"));
        counter(Metric.INJECTED_FAULTS, faults, FaultInjector::reordered, Tags.of("kind", "reorder"));
        counter(Metric.INJECTED_FAULTS, faults, FaultInjector::delayedBatches, Tags.of("kind", "delay"));
        fabric.onPeerAdded(peer -> {
            LinkStats link = fabric.links().get(peer);
            Tags p = Tags.of("peer", peer);
            counter(Metric.LINK_SENT, link, LinkStats::bytesSent, p);
            counter(Metric.LINK_RECEIVED, link, LinkStats::bytesReceived, p);
            counter(Metric.LINK_SENT_PACKETS, link, LinkStats::packetsSent, p);
            counter(Metric.LINK_RECEIVED_PACKETS, link, LinkStats::packetsReceived, p);
            counter(Metric.LINK_LANES_LOST, link, LinkStats::lanesLost, p);
            counter(Metric.LINK_RECEIVE_STALL, nic, n -> n.receiveStallNanos(peer) / 1e9, p);
            gauge(Metric.LINK_LANES_UP, fabric, f -> f.lanesUp(peer), p);
        });
    }

    /** Registers the count of open application sessions (the verbs service exists after the meters). */
    public void bindSessions(java.util.function.IntSupplier sessions) {
        gauge(Metric.SESSIONS, sessions, java.util.function.IntSupplier::getAsInt, Tags.empty());
    }

    /** Control-plane operations the verbs service started later or refused because their caller was over its rate. */
    public void bindPacing(io.pagewire.node.verbs.VerbsService verbs) {
        counter(Metric.CONTROL_PACED, verbs, io.pagewire.node.verbs.VerbsService::pacedOperations, Tags.of("outcome", "delayed"));
        counter(Metric.CONTROL_PACED, verbs, io.pagewire.node.verbs.VerbsService::pacingRefusals, Tags.of("outcome", "refused"));
    }

    /** The node's refusals of callers by reason, and batches that failed in the NIC (the meters hold their sources weakly: the node holds both). */
    public void bindRefusals(io.pagewire.node.security.CallerAuthentication authentication, Fabric fabric) {
        counter(Metric.SECURITY_REFUSALS, authentication, io.pagewire.node.security.CallerAuthentication::refusedForIdentity,
                Tags.of("reason", "no_identity"));
        counter(Metric.SECURITY_REFUSALS, authentication, io.pagewire.node.security.CallerAuthentication::refusedForToken,
                Tags.of("reason", "token"));
        counter(Metric.SECURITY_REFUSALS, fabric, Fabric::lanesRefused, Tags.of("reason", "lane"));
        counter(Metric.LINK_BATCHES_FAILED, fabric, Fabric::batchesFailed, Tags.empty());
    }

    private <T> void counter(Metric metric, T source, ToDoubleFunction<T> value, Tags tags) {
        FunctionCounter.builder(metric.meterName(), source, value).description(metric.help()).baseUnit(metric.baseUnit())
                .tags(tags).register(registry);
    }

    private <T> void gauge(Metric metric, T source, ToDoubleFunction<T> value, Tags tags) {
        Gauge.builder(metric.meterName(), source, value).description(metric.help()).baseUnit(metric.baseUnit())
                .tags(tags).strongReference(true).register(registry);
    }

    /** A timer published as a histogram only, from a microsecond to 30 s: Prometheus takes its quantiles. */
    private Timer histogram(Metric metric, Tags tags) {
        return Timer.builder(metric.meterName()).description(metric.help()).tags(tags)
                .publishPercentileHistogram()
                .minimumExpectedValue(Duration.ofNanos(1_000))
                .maximumExpectedValue(Duration.ofSeconds(30))
                .register(registry);
    }

    private Timer latencyTimer(Completion.Opcode op, String modeName) {
        return Timer.builder(Metric.OPERATION_LATENCY.meterName())
                .description(Metric.OPERATION_LATENCY.help())
                .tags("op", op.name().toLowerCase(Locale.ROOT), "mode", modeName)
                // Buckets only: Prometheus takes quantiles from them (histogram_quantile), and so does
                // snapshot(). Client-side percentiles would cost every completion three HdrHistogram
                // records, about a tenth of a busy sending loop.
                .publishPercentileHistogram()
                .minimumExpectedValue(Duration.ofNanos(10_000))
                .maximumExpectedValue(Duration.ofSeconds(30))
                .register(registry);
    }

    /** Every meter's current value, named as Prometheus names it, for `pagewire stat`. */
    public List<Stat> snapshot() {
        List<Stat> stats = new ArrayList<>();
        for (Meter meter : registry.getMeters()) {
            Meter.Id id = meter.getId();
            String name = registry.config().namingConvention().name(id.getName(), id.getType(), id.getBaseUnit());
            Map<String, String> tags = new java.util.TreeMap<>();
            for (Tag tag : id.getTagsAsIterable()) {
                if (!tag.getKey().equals("node")) {
                    tags.put(tag.getKey(), tag.getValue());
                }
            }
            String help = id.getDescription() == null ? "" : id.getDescription();
            if (meter instanceof Timer timer) {
                stats.add(stat(name + "_count", help, timer.count(), tags, true));
                CountAtBucket[] buckets = timer.takeSnapshot().histogramCounts();
                for (double quantile : SNAPSHOT_QUANTILES) {
                    Map<String, String> q = new java.util.TreeMap<>(tags);
                    q.put("quantile", Double.toString(quantile));
                    stats.add(stat(name, help, quantileSeconds(buckets, quantile), q, false));
                }
            } else if (meter instanceof FunctionCounter counter) {
                stats.add(stat(name, help, counter.count(), tags, true));
            } else if (meter instanceof io.micrometer.core.instrument.Counter counter) {
                stats.add(stat(name, help, counter.count(), tags, true));
            } else if (meter instanceof Gauge gauge) {
                stats.add(stat(name, help, gauge.value(), tags, false));
            }
        }
        stats.sort(java.util.Comparator.comparing(Stat::getName).thenComparing(s -> s.getTagsMap().toString()));
        return stats;
    }

    /** The quantiles that {@link #snapshot()} reports for each timer. */
    private static final double[] SNAPSHOT_QUANTILES = {0.5, 0.99};

    /**
     * A quantile from cumulative bucket counts, as Prometheus's histogram_quantile takes it: linear
     * within the bucket that holds the rank; 0 when nothing was recorded.
     */
    static double quantileSeconds(CountAtBucket[] cumulative, double quantile) {
        if (cumulative.length == 0) {
            return 0;
        }
        double total = cumulative[cumulative.length - 1].count();
        if (total <= 0) {
            return 0;
        }
        double rank = quantile * total;
        double lowerBound = 0;
        double lowerCount = 0;
        for (CountAtBucket bucket : cumulative) {
            double upperBound = bucket.bucket(java.util.concurrent.TimeUnit.SECONDS);
            if (bucket.count() >= rank) {
                double inBucket = bucket.count() - lowerCount;
                return inBucket <= 0 ? upperBound : lowerBound + (upperBound - lowerBound) * (rank - lowerCount) / inBucket;
            }
            lowerBound = upperBound;
            lowerCount = bucket.count();
        }
        return lowerBound;
    }

    private static Stat stat(String name, String help, double value, Map<String, String> tags, boolean counter) {
        return Stat.newBuilder().setName(name).setHelp(help).setValue(Double.isNaN(value) ? 0 : value).putAllTags(tags)
                .setCounter(counter).build();
    }
}
