package io.pagewire.node.metrics;

import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tag;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.distribution.CountAtBucket;
import io.pagewire.node.cm.CmCounters;
import io.pagewire.node.cm.ConnectionManager;
import io.pagewire.config.CountedEvent;
import io.pagewire.config.Meter;
import io.pagewire.kernel.FaultKind;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelCounter;
import io.pagewire.kernel.KernelCounters;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.fabric.FaultInjector;
import io.pagewire.node.fabric.LinkStats;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionStatus;
import io.pagewire.node.nic.FaultAnswer;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicCounters;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.Side;
import io.pagewire.node.nic.WaitCause;
import io.pagewire.node.security.BadInput;
import io.pagewire.node.security.CallerAuthentication;
import io.pagewire.proto.verbs.Stat;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.IntSupplier;
import java.util.function.LongSupplier;
import java.util.function.ToDoubleFunction;

/**
 * Binds a node's meters to a Micrometer registry by iterating their declarations (every
 * {@link NicCounter} and {@link KernelCounter}, every {@link Metric}), and reads them back for
 * `pagewire stat` and the demo: the same meters Prometheus scrapes.
 */
public final class NodeMetrics {
    private final MeterRegistry registry;
    /** What the function counters read, held here as long as the node holds its meters. */
    private final List<Object> sources = new ArrayList<>();
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
        for (NicCounter counter : NicCounter.values()) {
            if (counter.byMode()) {
                for (RegistrationMode mode : RegistrationMode.values()) {
                    counter(counter.meter(), c, x -> x.get(counter, mode) * counter.scale(), tags(counter, "mode", mode.name()));
                }
            } else {
                counter(counter.meter(), c, x -> x.get(counter) * counter.scale(), tags(counter));
            }
        }
        for (CompletionStatus status : CompletionStatus.values()) {
            counter(Metric.COMPLETIONS.meter(), c, x -> x.completions(status), Tags.of("status", status.name()));
        }
        for (Side side : Side.values()) {
            for (FaultKind kind : FaultKind.values()) {
                faultService[side.ordinal()][kind.ordinal()] = histogram(Metric.FAULT_SERVICE_TIME.meter(),
                        Tags.of("origin", side.tag(), "kind", kind.name().toLowerCase(Locale.ROOT)), 1_000);
            }
        }
        nic.observeFaults((side, kind, mode, serviceNs) ->
                faultService[side.ordinal()][kind.ordinal()].record(serviceNs, TimeUnit.NANOSECONDS));
        Timer[] waits = new Timer[WaitCause.values().length];
        for (WaitCause cause : WaitCause.values()) {
            waits[cause.ordinal()] = histogram(Metric.NIC_WAIT_TIME.meter(), Tags.of("cause", cause.tag()), 1_000);
        }
        nic.observeWaits((cause, nanos) -> waits[cause.ordinal()].record(nanos, TimeUnit.NANOSECONDS));
        for (Completion.Opcode op : Completion.Opcode.values()) {
            if (op == Completion.Opcode.RECV || op == Completion.Opcode.RECV_RDMA_WITH_IMM) {
                continue; // a receive is not timed from a post: it waits for whenever the peer sends
            }
            String opTag = op.name().toLowerCase(Locale.ROOT);
            if (op == Completion.Opcode.FETCH_ADD || op == Completion.Opcode.COMPARE_SWAP) {
                latency[op.ordinal()][RegistrationMode.values().length] = latencyTimer(opTag, "none");
            } else {
                for (RegistrationMode mode : RegistrationMode.values()) {
                    latency[op.ordinal()][mode.ordinal()] = latencyTimer(opTag, mode.name());
                }
            }
        }
        // Runs for every completion: an array lookup, no allocation.
        nic.observeCompletions((opcode, mode, status, bytes, latencyNs) -> {
            if (status == CompletionStatus.SUCCESS) {
                Timer timer = latency[opcode.ordinal()][mode == null ? RegistrationMode.values().length : mode.ordinal()];
                if (timer != null) {
                    timer.record(latencyNs, TimeUnit.NANOSECONDS);
                }
            }
        });
        gauge(Metric.TLB_ENTRIES, nic, Nic::tlbValidEntries, Tags.of("state", "valid"));
        gauge(Metric.TLB_ENTRIES, nic, Nic::tlbPinnedEntries, Tags.of("state", "pinned"));
        gauge(Metric.TLB_ENTRIES, nic, Nic::tlbEntries, Tags.of("state", "capacity"));
        gauge(Metric.SHADOW_ENTRIES, nic, Nic::shadowEntries, Tags.empty());
        gauge(Metric.CONTEXT_CACHE_ENTRIES, nic, Nic::contextCacheEntries, Tags.empty());
        for (FaultKind depth : FaultKind.values()) {
            gauge(Metric.MEMORY_PRESSURE, nic, n -> n.memoryPressure().depth() == depth ? n.memoryPressure().rate() : 0,
                    Tags.of("depth", depth.name().toLowerCase(Locale.ROOT)));
        }
        for (FaultAnswer answer : FaultAnswer.values()) {
            gauge(Metric.FAULT_ANSWER, nic, n -> n.faultAnswer() == answer ? 1 : 0, Tags.of("answer", answer.name().toLowerCase(Locale.ROOT)));
        }
        gauge(Metric.QUEUE_PAIRS, nic, n -> n.queuePairs().size(), Tags.empty());
        gauge(Metric.ENDPOINTS, nic, n -> n.endpoints().size(), Tags.empty());
        gauge(Metric.RECEIVE_CREDITS, nic, Nic::creditsGranted, Tags.of("state", "granted"));
        gauge(Metric.RECEIVE_CREDITS, nic, Nic::creditsTotal, Tags.of("state", "total"));
    }

    private void bindKernel(KernelAgent kernel) {
        KernelCounters k = kernel.counters();
        for (KernelCounter counter : KernelCounter.values()) {
            counter(counter.meter(), k, x -> x.get(counter) * counter.scale(), tags(counter));
        }
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
        gauge(Metric.SWAP_READ_LATENCY, kernel, x -> x.context().swapDevice().readLatencyNs() / 1e9, Tags.empty());
        gauge(Metric.CALLER_SHARE, kernel, x -> x.context().callerShare(), Tags.empty());
        gauge(Metric.SYSTEM_BUFFER_USED, kernel, x -> (double) x.systemBuffer().slotsInUse() * x.systemBuffer().slotBytes(), Tags.empty());
        gauge(Metric.SYSTEM_BUFFER_PEAK, kernel, x -> (double) x.systemBuffer().peakSlotsInUse() * x.systemBuffer().slotBytes(), Tags.empty());
        gauge(Metric.SYSTEM_BUFFER_CAPACITY, kernel, x -> (double) x.systemBuffer().slotCount() * x.systemBuffer().slotBytes(), Tags.empty());
        gauge(Metric.FAULT_QUEUE_DEPTH, kernel, x -> x.faultService().depth(), Tags.empty());
    }

    private void bindFabric(Fabric fabric, Nic nic) {
        FaultInjector faults = fabric.faults();
        gauge(Metric.INJECTED_LOSS, faults, FaultInjector::lossRate, Tags.empty());
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
            counter(Metric.LINK_RECEIVE_STALL, nic.router(), r -> r.receiveStallNanos(peer) / 1e9, p);
            gauge(Metric.LINK_LANES_UP, fabric, f -> f.lanesUp(peer), p);
        });
    }

    /** Every meter a node exports, each once: the counters' and the others'. */
    public static List<Meter> meters() {
        Map<String, Meter> meters = new LinkedHashMap<>();
        for (NicCounter counter : NicCounter.values()) {
            meters.putIfAbsent(counter.meter().name(), counter.meter());
        }
        for (KernelCounter counter : KernelCounter.values()) {
            meters.putIfAbsent(counter.meter().name(), counter.meter());
        }
        for (Metric metric : Metric.values()) {
            meters.putIfAbsent(metric.meter().name(), metric.meter());
        }
        return List.copyOf(meters.values());
    }

    private static Tags tags(CountedEvent counter, String... more) {
        Tags tags = Tags.empty();
        List<String> pairs = counter.tags();
        for (int i = 0; i < pairs.size(); i += 2) {
            tags = tags.and(pairs.get(i), pairs.get(i + 1));
        }
        for (int i = 0; i < more.length; i += 2) {
            tags = tags.and(more[i], more[i + 1]);
        }
        return tags;
    }

    /** Registers the counts of open application sessions, all and on rings (the verbs service exists after the meters). */
    public void bindSessions(IntSupplier sessions, IntSupplier onRings) {
        gauge(Metric.SESSIONS, sessions, IntSupplier::getAsInt, Tags.empty());
        gauge(Metric.SESSIONS_ON_RINGS, onRings, IntSupplier::getAsInt, Tags.empty());
    }

    /** The connection manager's exchanges by kind, and its ids alive. */
    public void bindConnectionManager(ConnectionManager cm) {
        CmCounters c = cm.counters();
        counter(Metric.CM_EXCHANGES, c, CmCounters::requestsSent, Tags.of("kind", "request_sent"));
        counter(Metric.CM_EXCHANGES, c, CmCounters::requestsReceived, Tags.of("kind", "request_received"));
        counter(Metric.CM_EXCHANGES, c, CmCounters::established, Tags.of("kind", "established"));
        counter(Metric.CM_EXCHANGES, c, CmCounters::rejects, Tags.of("kind", "rejected"));
        counter(Metric.CM_EXCHANGES, c, CmCounters::unreachable, Tags.of("kind", "unreachable"));
        counter(Metric.CM_EXCHANGES, c, CmCounters::disconnects, Tags.of("kind", "disconnect"));
        counter(Metric.CM_EXCHANGES, c, CmCounters::resent, Tags.of("kind", "resent"));
        counter(Metric.CM_EXCHANGES, c, CmCounters::addressErrors, Tags.of("kind", "address_error"));
        gauge(Metric.CM_IDS, cm, ConnectionManager::idCount, Tags.empty());
    }

    /** Control-plane operations the verbs service started later or refused because their caller was over its rate. */
    public void bindPacing(LongSupplier delayed, LongSupplier refused) {
        counter(Metric.CONTROL_PACED, delayed, LongSupplier::getAsLong, Tags.of("outcome", "delayed"));
        counter(Metric.CONTROL_PACED, refused, LongSupplier::getAsLong, Tags.of("outcome", "refused"));
    }

    /** The node's refusals of callers by reason, and batches that failed in the NIC (the meters hold their sources weakly: the node holds both). */
    public void bindRefusals(CallerAuthentication authentication, Fabric fabric, BadInput badInput) {
        for (BadInput.Source source : BadInput.Source.values()) {
            counter(Metric.BAD_INPUT, badInput, b -> b.count(source), Tags.of("source", source.tag()));
        }
        counter(Metric.SECURITY_REFUSALS, authentication, CallerAuthentication::refusedForIdentity,
                Tags.of("reason", "no_identity"));
        counter(Metric.SECURITY_REFUSALS, authentication, CallerAuthentication::refusedForToken,
                Tags.of("reason", "token"));
        counter(Metric.SECURITY_REFUSALS, fabric, Fabric::lanesRefused, Tags.of("reason", "lane"));
        counter(Metric.LINK_BATCHES_FAILED, fabric, Fabric::batchesFailed, Tags.empty());
    }

    private <T> void counter(Metric metric, T source, ToDoubleFunction<T> value, Tags tags) {
        counter(metric.meter(), source, value, tags);
    }

    private <T> void counter(Meter meter, T source, ToDoubleFunction<T> value, Tags tags) {
        sources.add(source); // a function counter holds its source weakly
        FunctionCounter.builder(meter.name(), source, value).description(meter.help()).baseUnit(meter.baseUnit()).tags(tags).register(registry);
    }

    private <T> void gauge(Metric metric, T source, ToDoubleFunction<T> value, Tags tags) {
        Meter meter = metric.meter();
        Gauge.builder(meter.name(), source, value).description(meter.help()).baseUnit(meter.baseUnit())
                .tags(tags).strongReference(true).register(registry);
    }

    /**
     * A timer published as histogram buckets only, from {@code minimumNs} to 30 s: Prometheus takes its
     * quantiles from them (histogram_quantile), and so does {@link #snapshot()}. Client-side percentiles
     * would cost every completion three HdrHistogram records, about a tenth of a busy sending loop.
     */
    private Timer histogram(Meter meter, Tags tags, long minimumNs) {
        return Timer.builder(meter.name()).description(meter.help()).tags(tags)
                .publishPercentileHistogram()
                .minimumExpectedValue(Duration.ofNanos(minimumNs))
                .maximumExpectedValue(Duration.ofSeconds(30))
                .register(registry);
    }

    private Timer latencyTimer(String op, String mode) {
        return histogram(Metric.OPERATION_LATENCY.meter(), Tags.of("op", op, "mode", mode), 10_000);
    }

    /** Every meter's current value, named as Prometheus names it, for `pagewire stat`. */
    public List<Stat> snapshot() {
        List<Stat> stats = new ArrayList<>();
        for (io.micrometer.core.instrument.Meter meter : registry.getMeters()) {
            io.micrometer.core.instrument.Meter.Id id = meter.getId();
            String name = registry.config().namingConvention().name(id.getName(), id.getType(), id.getBaseUnit());
            Map<String, String> tags = new TreeMap<>();
            for (Tag tag : id.getTagsAsIterable()) {
                if (!tag.getKey().equals("node")) {
                    tags.put(tag.getKey(), tag.getValue());
                }
            }
            String help = id.getDescription() == null ? "" : id.getDescription();
            if (meter instanceof Timer timer) {
                stats.add(stat(name + "_count", help, timer.count(), tags, true));
                stats.add(stat(name + "_sum", help, timer.totalTime(TimeUnit.SECONDS), tags, true));
                stats.add(stat(name + "_max", help, timer.max(TimeUnit.SECONDS), tags, false));
                CountAtBucket[] buckets = timer.takeSnapshot().histogramCounts();
                for (double quantile : SNAPSHOT_QUANTILES) {
                    Map<String, String> q = new TreeMap<>(tags);
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
        stats.sort(Comparator.comparing(Stat::getName).thenComparing(s -> s.getTagsMap().toString()));
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
            double upperBound = bucket.bucket(TimeUnit.SECONDS);
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
