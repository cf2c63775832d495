package io.pagewire.tools.experiment;

import io.pagewire.kernel.KernelCounter;
import io.pagewire.kernel.SystemBuffer;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicCounters;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.ReceiveRequest;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;
import org.HdrHistogram.Histogram;

/**
 * {@code receive-faults}: what each design does when data arrives for a page that is not in memory.
 * One node streams 64 KiB messages into a region of another four times that node's memory, twice
 * over, as RDMA WRITEs and as SENDs into receive buffers posted across the region, under each mode
 * that can register it: PIN_ON_MISS (U-Net/MM: the lane stalls while the kernel pins the page),
 * SHADOW (NetVM: the data waits in the system buffer, its senders held back by credits) and
 * ON_DEMAND (NIC on-demand paging: RNR NAK, and the sender retransmits after the fault). Against a
 * running cluster the region is sized from the receiving node's memory and swap.
 */
public final class ReceiveFaultsExperiment implements Experiment {
    private static final int MESSAGE = 64 << 10;

    /** How big a run is: the receiver's memory, its region, passes over the region, messages in flight. */
    record Shape(long physicalMemoryBytes, long regionBytes, int passes, int depth) {
        long messages() {
            return regionBytes / MESSAGE * passes;
        }
    }

    static final Shape DEFAULT = new Shape(8L << 20, 32L << 20, 2, 8);
    static final Shape REDUCED = new Shape(2L << 20, 8L << 20, 2, 8);

    private static final RegistrationMode[] MODES = {RegistrationMode.PIN_ON_MISS, RegistrationMode.SHADOW, RegistrationMode.ON_DEMAND};

    /** How the data arrives. */
    enum Operation { WRITE, SEND }

    @Override
    public String name() {
        return "receive-faults";
    }

    @Override
    public String paper() {
        return "Three answers to a receive into a page that is not in memory: U-Net/MM's NIC stalls the receive while the kernel pins the page "
                + "(nothing is dropped); NetVM's parks the data in a system buffer whose credits hold senders back (it never overflows); "
                + "on-demand paging NICs answer RNR NAK and the sender retransmits once the page is in.";
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        if (settings.cluster() != null) {
            return runOnCluster(settings, progress);
        }
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        return runAll(shape, progress, (op, mode) -> run(shape, op, mode));
    }

    /**
     * The experiment on two nodes of a running cluster, through the SDK: the region is four times the
     * receiving node's memory, or as much as three quarters of what one application may hold of its
     * memory and swap together (its share, {@code pagewire.quota.callerShare}).
     */
    private ExperimentResult runOnCluster(ExperimentSettings settings, PrintWriter progress) throws Exception {
        try (ApplicationPair pair = ApplicationPair.open(settings)) {
            long memory = pair.responder().node().physicalMemoryBytes();
            NodeStats stats = NodeStats.read(pair.responder());
            long swap = (long) stats.sum("pagewire_swap_capacity_bytes");
            double share = stats.sum("pagewire_caller_share");
            long region = Math.min(4 * memory, (long) ((memory + swap) * share) / 4 * 3) / MESSAGE * MESSAGE;
            Shape base = settings.reduced() ? REDUCED : DEFAULT;
            Shape shape = new Shape(memory, region, base.passes(), base.depth());
            progress.printf(Locale.ROOT, "receive-faults: %s; %s has %d MiB of memory and %d MiB of swap: a region of %d MiB%n", pair.where(),
                    pair.responder().node().nodeId(), memory >> 20, swap >> 20, region >> 20);
            progress.flush();
            if (region <= memory) {
                progress.printf(Locale.ROOT, "receive-faults: the region fits the node's memory (too little swap): its pages fault only when first touched%n");
            }
            return runAll(shape, progress, (op, mode) -> runOneOnCluster(pair, shape, op, mode));
        }
    }

    /** Measures one operation in one mode. */
    @FunctionalInterface
    private interface Runner {
        Run run(Operation op, RegistrationMode mode) throws Exception;
    }

    private static ExperimentResult runAll(Shape shape, PrintWriter progress, Runner runner) throws Exception {
        List<Run> runs = new ArrayList<>();
        for (Operation op : Operation.values()) {
            for (RegistrationMode mode : MODES) {
                progress.printf(Locale.ROOT, "receive-faults: %s into %d MiB (%.1fx the receiver's memory), %s ...%n", op, shape.regionBytes() >> 20,
                        (double) shape.regionBytes() / shape.physicalMemoryBytes(), mode);
                progress.flush();
                runs.add(runner.run(op, mode));
            }
        }
        return result(shape, runs);
    }

    /**
     * One operation and mode on a running cluster: the same stream through the SDK, every counter
     * from the two nodes' meters (what they grew by during the run), the system buffer's peak from
     * the receiving node's (its peak since it started).
     */
    private static Run runOneOnCluster(ApplicationPair pair, Shape shape, Operation op, RegistrationMode mode) throws Exception {
        try (ClusterLink link = ClusterLink.open(pair.requester(), pair.responder(), "receive-faults", MESSAGE)) {
            io.pagewire.client.Endpoint owner = link.receiver();
            long dst = owner.allocate(shape.regionBytes());
            io.pagewire.client.MemoryRegion target = owner.register(dst, shape.regionBytes(), io.pagewire.client.RegistrationMode.valueOf(mode.name()),
                    io.pagewire.client.Access.all());
            io.pagewire.client.MemoryRegion source = link.source();
            ClusterReposter reposter = op == Operation.SEND ? new ClusterReposter(link.receiverQueuePair(), target, shape) : null;
            NodeStats outBefore = NodeStats.read(pair.requester());
            NodeStats inBefore = NodeStats.read(pair.responder());
            Histogram latency = new Histogram(60_000_000_000L, 3);
            long slots = shape.regionBytes() / MESSAGE;
            long start = System.nanoTime();
            link.stream(0, shape.messages(), shape.depth(), i -> op == Operation.WRITE
                    ? io.pagewire.client.WorkRequest.write(source, source.address(), MESSAGE, dst + i % slots * MESSAGE, target.rkey())
                    : io.pagewire.client.WorkRequest.send(source, source.address(), MESSAGE), 120, "receive-faults", latency);
            double seconds = (System.nanoTime() - start) / 1e9;
            if (reposter != null) {
                reposter.finish(shape.messages());
            }
            NodeStats out = NodeStats.read(pair.requester());
            NodeStats in = NodeStats.read(pair.responder());
            long noReceive = Math.round(in.since(inBefore, "pagewire_receive_rnr_naks_sent_total", "cause=no_receive"));
            int slotBytes = SystemBuffer.slotBytes(pair.responder().node().pageSize());
            return new Run(op, mode, (double) shape.messages() * MESSAGE / seconds / 1e6, latency.getValueAtPercentile(50) / 1e3,
                    latency.getValueAtPercentile(99) / 1e3, Resent.of(cause -> Math.round(out.since(outBefore, "pagewire_retransmitted_packets_total",
                            "cause=" + cause.tags().get(1)))),
                    Math.round(in.since(inBefore, "pagewire_rnr_naks_sent_total")) - noReceive, noReceive,
                    Math.round(in.since(inBefore, "pagewire_parked_parts_total")), (int) (in.sum("pagewire_system_buffer_peak_bytes") / slotBytes),
                    (int) (in.sum("pagewire_system_buffer_capacity_bytes") / slotBytes), Math.round(out.since(outBefore, "pagewire_credit_waits_total")),
                    in.since(inBefore, "pagewire_receive_stall_seconds_total"),
                    Math.round(in.since(inBefore, "pagewire_kernel_page_faults_total", "origin=nic", "kind=major")));
        }
    }

    /** Keeps receives posted through the SDK, each at the next message-sized slot of the region, reposting as they complete. */
    private static final class ClusterReposter {
        private final io.pagewire.client.QueuePair qp;
        private final io.pagewire.client.MemoryRegion region;
        private final Shape shape;
        private final CompletableFuture<Void> done = new CompletableFuture<>();
        private final AtomicLong received = new AtomicLong();
        private final AtomicLong posted = new AtomicLong();

        ClusterReposter(io.pagewire.client.QueuePair qp, io.pagewire.client.MemoryRegion region, Shape shape) {
            this.qp = qp;
            this.region = region;
            this.shape = shape;
            for (int i = 0; i < 4 * shape.depth(); i++) {
                postNext();
            }
        }

        private void postNext() {
            long n = posted.getAndIncrement();
            if (n >= shape.messages()) {
                return;
            }
            long slots = shape.regionBytes() / MESSAGE;
            qp.postReceive(region, region.address() + n % slots * MESSAGE, MESSAGE).whenComplete((c, e) -> {
                if (e != null) {
                    done.completeExceptionally(e);
                } else if (received.incrementAndGet() == shape.messages()) {
                    done.complete(null);
                } else {
                    postNext();
                }
            });
        }

        void finish(long expected) throws Exception {
            try {
                done.get(120, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                throw new IllegalStateException("receive-faults: a receive failed: " + e.getCause().getMessage(), e.getCause());
            } catch (TimeoutException e) {
                throw new IllegalStateException("receive-faults: " + received.get() + " receives completed for " + expected + " SENDs within 120 s");
            }
        }
    }

    /** What one operation and mode measured. */
    record Run(Operation op, RegistrationMode mode, double megabytesPerSecond, double p50Us, double p99Us, Resent resent, long rnrNaks,
            long noReceiveRnrNaks, long parkedParts, int peakBufferSlots, int bufferSlots, long creditWaits, double stallSeconds, long majorFaults) {
        long retransmitted() {
            return resent.total();
        }
    }

    /** Packets the sender sent again, by what sent them again (the sender's {@code pagewire_retransmitted_packets_total} by cause). */
    record Resent(long ackTimeout, long rnrNak, long sequenceNak, long laneReplay, long readRefetch) {
        static Resent of(java.util.function.ToLongFunction<NicCounter> count) {
            return new Resent(count.applyAsLong(NicCounter.RETRANSMITTED_AFTER_ACK_TIMEOUT), count.applyAsLong(NicCounter.RETRANSMITTED_AFTER_RNR_NAK),
                    count.applyAsLong(NicCounter.RETRANSMITTED_AFTER_SEQUENCE_NAK), count.applyAsLong(NicCounter.RETRANSMITTED_AFTER_LANE_LOSS),
                    count.applyAsLong(NicCounter.RETRANSMITTED_READ_REFETCH));
        }

        long total() {
            return ackTimeout + rnrNak + sequenceNak + laneReplay + readRefetch;
        }

        /** timeout/RNR/sequence/lane, as the table shows them. */
        String split() {
            return ackTimeout + "/" + rnrNak + "/" + sequenceNak + "/" + laneReplay;
        }
    }

    private Run run(Shape shape, Operation op, RegistrationMode mode) throws Exception {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.IN_PROCESS, c -> {
            c.security().plaintext();
            if (c.nodeId().equals("node-2")) {
                c.kernel().physicalMemoryBytes(shape.physicalMemoryBytes()).swapBytes(Math.max(64L << 20, 2 * shape.regionBytes()));
            }
        })) {
            PagewireNode sender = cluster.node(1);
            PagewireNode receiver = cluster.node(2);
            Endpoint writer = sender.nic().openEndpoint("receive-faults-writer");
            Endpoint owner = receiver.nic().openEndpoint("receive-faults-receiver");
            Link link = Link.connect(sender.nic(), writer, receiver.nic(), owner);
            CompletionQueue cq = link.cq();
            CompletionQueue receives = link.remoteCq();
            QueuePair qp = link.qp();
            QueuePair remote = link.remoteQp();
            long src = writer.space().allocate(MESSAGE);
            writer.space().store(src, new byte[MESSAGE], 0, MESSAGE);
            MemoryRegion source = writer.register(src, MESSAGE, RegistrationMode.PINNED, Access.all());
            long dst = owner.space().allocate(shape.regionBytes());
            MemoryRegion target = owner.register(dst, shape.regionBytes(), mode, Access.all());

            Reposter reposter = null;
            if (op == Operation.SEND) {
                reposter = new Reposter(remote, receives, target, shape);
                reposter.start();
            }
            Histogram latency = new Histogram(60_000_000_000L, 3);
            long[] postedAt = new long[shape.depth()];
            long start = System.nanoTime();
            int inFlight = 0;
            for (long i = 0; i < shape.messages(); i++) {
                if (inFlight == shape.depth()) {
                    reap(cq, latency, postedAt);
                    inFlight--;
                }
                long offset = i % (shape.regionBytes() / MESSAGE) * MESSAGE;
                postedAt[(int) (i % shape.depth())] = System.nanoTime();
                qp.post(op == Operation.WRITE ? WorkRequest.write(i, source.lkey(), src, MESSAGE, dst + offset, target.rkey())
                        : WorkRequest.send(i, source.lkey(), src, MESSAGE));
                inFlight++;
            }
            for (; inFlight > 0; inFlight--) {
                reap(cq, latency, postedAt);
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            if (reposter != null) {
                reposter.finish(shape.messages());
            }
            NicCounters out = sender.nic().counters();
            NicCounters in = receiver.nic().counters();
            SystemBuffer buffer = receiver.kernel().systemBuffer();
            return new Run(op, mode, (double) shape.messages() * MESSAGE / seconds / 1e6, latency.getValueAtPercentile(50) / 1e3,
                    latency.getValueAtPercentile(99) / 1e3, Resent.of(out::get),
                    in.get(NicCounter.RNR_NAKS_SENT) - in.get(NicCounter.NO_RECEIVE_RNR_NAKS_SENT), in.get(NicCounter.NO_RECEIVE_RNR_NAKS_SENT),
                    in.get(NicCounter.PARKED_PARTS), buffer.peakSlotsInUse(), buffer.slotCount(), out.get(NicCounter.CREDIT_WAITS),
                    in.get(NicCounter.RECEIVE_STALL_NANOS) / 1e9, receiver.kernel().counters().get(KernelCounter.NIC_FAULTS_MAJOR));
        }
    }

    /** Takes one completion, requiring success, and records its latency (messages complete in order on one queue pair). */
    private static void reap(CompletionQueue cq, Histogram latency, long[] postedAt) throws InterruptedException {
        Completion done = cq.take(120, TimeUnit.SECONDS);
        if (done == null || !done.ok()) {
            throw new IllegalStateException("receive-faults: a message " + (done == null ? "did not complete within 120 s" : "failed: " + done.error()));
        }
        latency.recordValue(Math.max(0, System.nanoTime() - postedAt[(int) (done.wrId() % postedAt.length)]));
    }

    /** Keeps receives posted on the receiving queue pair, each at the next message-sized slot of the region, reposting as they complete. */
    private static final class Reposter extends Thread {
        private final QueuePair qp;
        private final CompletionQueue receives;
        private final MemoryRegion region;
        private final Shape shape;
        private final AtomicReference<Throwable> failure = new AtomicReference<>();
        private long posted;
        private volatile long received;

        Reposter(QueuePair qp, CompletionQueue receives, MemoryRegion region, Shape shape) {
            super("receive-faults-reposter");
            setDaemon(true);
            this.qp = qp;
            this.receives = receives;
            this.region = region;
            this.shape = shape;
            for (int i = 0; i < 4 * shape.depth(); i++) {
                postNext();
            }
        }

        private void postNext() {
            long slots = shape.regionBytes() / MESSAGE;
            qp.postReceive(new ReceiveRequest(posted, region.lkey(), region.address() + posted % slots * MESSAGE, MESSAGE));
            posted++;
        }

        @Override
        public void run() {
            try {
                while (received < shape.messages()) {
                    Completion done = receives.take(120, TimeUnit.SECONDS);
                    if (done == null || !done.ok()) {
                        throw new IllegalStateException("a receive " + (done == null ? "did not complete within 120 s" : "failed: " + done.error()));
                    }
                    received++;
                    if (posted < shape.messages()) {
                        postNext();
                    }
                }
            } catch (Throwable e) {
                failure.set(e);
            }
        }

        void finish(long expected) throws InterruptedException {
            join(120_000);
            if (failure.get() != null) {
                throw new IllegalStateException("receive-faults: " + failure.get().getMessage(), failure.get());
            }
            if (received != expected) {
                throw new IllegalStateException("receive-faults: " + received + " receives completed for " + expected + " SENDs");
            }
        }
    }

    private static ExperimentResult result(Shape shape, List<Run> runs) {
        List<List<Object>> rows = new ArrayList<>();
        Map<String, double[][]> series = new LinkedHashMap<>();
        List<String> categories = new ArrayList<>();
        for (RegistrationMode mode : MODES) {
            categories.add(mode.name());
        }
        for (Run r : runs) {
            rows.add(List.of(r.op().name(), r.mode().name(), r.megabytesPerSecond(), r.p50Us(), r.p99Us(), r.retransmitted(), r.resent().split(), r.rnrNaks(),
                    r.noReceiveRnrNaks(), r.parkedParts(), r.peakBufferSlots() + "/" + r.bufferSlots(), r.creditWaits(), r.stallSeconds(), r.majorFaults()));
            double[][] values = series.computeIfAbsent(r.op() + " MB/s", k -> new double[][] {new double[MODES.length], new double[MODES.length]});
            values[1][Arrays.asList(MODES).indexOf(r.mode())] = r.megabytesPerSecond();
        }
        List<Claim> claims = new ArrayList<>();
        List<Run> pinOnMiss = runs.stream().filter(r -> r.mode() == RegistrationMode.PIN_ON_MISS).toList();
        // A SEND that finds no posted receive is answered RNR too, whatever the mode (the reposting thread fell
        // behind): those NAKs, and the retransmissions after them, are not a page's doing and are counted apart.
        claims.add(new Claim("U-Net/MM: a receive into a missing page stalls while the kernel pins it; it is never NAKed for a page, and"
                + " nothing is sent again (but after an RNR NAK for want of a posted receive)",
                pinOnMiss.stream().allMatch(r -> r.rnrNaks() == 0 && r.stallSeconds() > 0 && r.resent().ackTimeout() == 0
                        && r.resent().sequenceNak() == 0 && r.resent().laneReplay() == 0 && (r.resent().rnrNak() == 0 || r.noReceiveRnrNaks() > 0)),
                describe(pinOnMiss, r -> String.format(Locale.ROOT, "%s: %.2f s stalled, %d RNR NAKs for pages, %d retransmitted (after %d"
                        + " acknowledgement timeouts, %d RNR NAKs, %d sequence NAKs, %d lane losses; %d RNR NAKs for want of a posted receive)",
                        r.op(), r.stallSeconds(), r.rnrNaks(), r.retransmitted(), r.resent().ackTimeout(), r.resent().rnrNak(),
                        r.resent().sequenceNak(), r.resent().laneReplay(), r.noReceiveRnrNaks()))));
        List<Run> shadow = runs.stream().filter(r -> r.mode() == RegistrationMode.SHADOW).toList();
        claims.add(new Claim("NetVM: data for a missing page waits in the system buffer, which never overflows, and no sender is NAKed",
                shadow.stream().allMatch(r -> r.parkedParts() > 0 && r.peakBufferSlots() <= r.bufferSlots() && r.rnrNaks() == 0),
                describe(shadow, r -> String.format(Locale.ROOT, "%s: %d parts parked, at most %d of %d slots in use, %d credit waits, %d RNR NAKs for pages",
                        r.op(), r.parkedParts(), r.peakBufferSlots(), r.bufferSlots(), r.creditWaits(), r.rnrNaks()))));
        List<Run> onDemand = runs.stream().filter(r -> r.mode() == RegistrationMode.ON_DEMAND).toList();
        claims.add(new Claim("on-demand paging: a receive fault is answered with RNR NAK and the sender retransmits",
                onDemand.stream().allMatch(r -> r.rnrNaks() > 0 && r.retransmitted() > 0),
                describe(onDemand, r -> String.format(Locale.ROOT, "%s: %d RNR NAKs for pages, %d packets retransmitted", r.op(), r.rnrNaks(),
                        r.retransmitted()))));
        return new ExperimentResult(List.of("op", "mode", "MB/s", "p50 us", "p99 us", "retransmitted", "resent after timeout/RNR/seq/lane", "RNR NAKs (faults)", "RNR NAKs (no receive)",
                "parked parts", "buffer peak/slots",
                "credit waits", "stall s", "major faults"), rows,
                new ExperimentResult.Plot(String.format(Locale.ROOT, "receive-faults: streaming into %.0fx the receiver's memory",
                        (double) shape.regionBytes() / shape.physicalMemoryBytes()), "registration mode", "MB/s", false, series, categories),
                claims);
    }

    private static String describe(List<Run> runs, Function<Run, String> line) {
        return String.join("; ", runs.stream().map(line).toList());
    }
}
