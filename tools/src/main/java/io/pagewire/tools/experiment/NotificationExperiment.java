package io.pagewire.tools.experiment;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import java.io.PrintWriter;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongConsumer;
import org.HdrHistogram.Histogram;

/**
 * {@code notification} (NetVM): how an application notices that a peer's data has arrived. One
 * application writes 8 bytes with notification (WRITE_WITH_NOTIFY) to an application on another
 * node, one at a time; the receiver notices each by polling the event counter (a read of local
 * memory, {@link EventCounter#poll}), by blocking on it ({@link EventCounter#await}, a wait in the
 * application's memory that the delivered change settles), or by a handler
 * ({@link EventCounter#onChange}). Both applications run in this process, and by default both
 * nodes too, so one clock times each notification twice: from the write's post to its detection (the whole path), and from
 * the moment the receiving node's counter changed to its detection (what noticing costs, the part
 * NetVM's figures compare; the claims are judged on it). Against a running cluster's nodes only the
 * first can be timed, and the claims are judged on it. The methods take turns in blocks, rounds
 * apart, so that the machine's drift falls on all of them.
 */
public final class NotificationExperiment implements Experiment {
    /** How one notification is noticed. */
    enum Detection {
        POLL, HANDLER, BLOCK
    }

    private static final int ROUNDS = 5;
    /**
     * Notifications per method before any is timed, at every size: cold, the path costs three times
     * what it costs warm here, and the differences between the methods drown in it.
     */
    private static final int WARM_UP = 1_000;

    @Override
    public String name() {
        return "notification";
    }

    @Override
    public String paper() {
        return "NetVM (Huang, 2009) notifies with event counters the application can poll, block on or attach a handler to: notification adds "
                + "2.96 to 17.49 us depending on how it is detected, polling the cheapest.";
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        int perBlock = settings.reduced() ? 200 : 1_000;
        Map<Detection, Timings> timings = new LinkedHashMap<>();
        for (Detection d : Detection.values()) {
            timings.put(d, new Timings());
        }
        boolean onOwnNodes;
        try (ApplicationPair pair = ApplicationPair.open(settings)) {
            Pagewire nodeA = pair.requester();
            Pagewire nodeB = pair.responder();
            progress.printf(Locale.ROOT, "notification: %s%n", pair.where());
            Endpoint a = nodeA.openEndpoint("notification-writer");
            Endpoint b = nodeB.openEndpoint("notification-receiver");
            long src = a.allocate(4096);
            long dst = b.allocate(4096);
            MemoryRegion source = a.register(src, 4096, RegistrationMode.PINNED, Access.all());
            MemoryRegion target = b.register(dst, 4096, RegistrationMode.PINNED, Access.all());
            QueuePair qp = a.connect(b);
            // The receiving node's side of the endpoint, where its counter changes: only in this JVM.
            onOwnNodes = pair.embedded().isPresent();
            Pinger pinger = new Pinger(qp, source, target, pair.embedded().map(c -> c.node(2).nic().endpoint(b.id())).orElse(null),
                    pair.embedded().map(c -> (MeterRegistry) c.node(2).registry()).orElse(null));
            progress.println("notification: warming up ...");
            progress.flush();
            for (Detection d : Detection.values()) {
                pinger.run(b, d, WARM_UP, new Timings());
            }
            for (int round = 0; round < ROUNDS; round++) {
                for (Detection d : Detection.values()) {
                    progress.printf(Locale.ROOT, "notification: round %d of %d, %s, %d notifications ...%n", round + 1, ROUNDS, d, perBlock);
                    progress.flush();
                    pinger.run(b, d, perBlock, timings.get(d));
                }
            }
        }
        return result(timings, onOwnNodes);
    }

    /**
     * One method's notifications, timed from the write's post and from the node's counter change, with
     * the calls on the counter (reads and waits) the receiving node served meanwhile and the blocks
     * they ran in: each block's counter is new, so one read per block subscribes it; more is a call per
     * notification.
     */
    private record Timings(Histogram fromPost, Histogram fromChange, AtomicLong nodeCalls, AtomicLong blocks) {
        Timings() {
            this(new Histogram(60_000_000_000L, 3), new Histogram(60_000_000_000L, 3), new AtomicLong(), new AtomicLong());
        }
    }

    /** The names of the verbs calls that read or wait for an event counter, as the node's gRPC meters tag them. */
    private static final List<String> COUNTER_CALLS = List.of("ReadEventCounter", "AwaitEventCounter");

    /** Calls on event counters the node has served so far, from its gRPC meters. */
    private static long counterCallsServed(MeterRegistry registry) {
        double served = 0;
        for (String method : COUNTER_CALLS) {
            for (Counter c : registry.find("grpc.server.requests.received").tag("method", method).counters()) {
                served += c.count();
            }
        }
        return (long) served;
    }

    /**
     * Sends notified writes one at a time to a fresh counter and times each from its post, and from
     * the change of the counter on {@code receiverOnNode} (the receiving node's side of the endpoint;
     * null when the node runs elsewhere), to its detection; counts the counter calls the receiving
     * node served meanwhile from {@code receiverMeters} (null when the node runs elsewhere).
     */
    private record Pinger(QueuePair qp, MemoryRegion source, MemoryRegion target, io.pagewire.node.nic.Endpoint receiverOnNode,
            MeterRegistry receiverMeters) {
        void run(Endpoint receiver, Detection detection, int count, Timings timings) throws Exception {
            long callsBefore = receiverMeters == null ? 0 : counterCallsServed(receiverMeters);
            try (EventCounter counter = receiver.createEventCounter(EnumSet.of(Access.REMOTE_WRITE))) {
                AtomicLong detected = new AtomicLong();
                long[] postedAt = new long[count + 1];
                long[] changedAt = new long[count + 1];
                long[] detectedAt = new long[count + 1];
                // Added before any subscription, so it runs first of the counter's handlers on the node.
                LongConsumer stamp = value -> {
                    if (value >= 1 && value <= count) {
                        changedAt[(int) value] = System.nanoTime();
                    }
                };
                io.pagewire.node.nic.EventCounter onNode = receiverOnNode == null ? null : receiverOnNode.eventCounter(counter.id());
                if (onNode != null) {
                    onNode.addHandler(stamp);
                }
                Thread driver = Thread.currentThread();
                Thread detector = null;
                AutoCloseable handler = null;
                switch (detection) {
                    case HANDLER -> handler = counter.onChange(value -> {
                        if (value > detected.get() && value <= count) {
                            detectedAt[(int) value] = System.nanoTime();
                            detected.set(value);
                            LockSupport.unpark(driver);
                        }
                    });
                    case POLL -> {
                        counter.poll(); // subscribes: from here on a poll is a read of local memory
                        detector = new Thread(() -> {
                            for (long next = 1; next <= count; next++) {
                                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                                while (counter.poll() < next && System.nanoTime() < deadline) {
                                    Thread.yield(); // polls memory, leaving the core to others between looks
                                }
                                detectedAt[(int) next] = System.nanoTime();
                                detected.set(next);
                                LockSupport.unpark(driver);
                            }
                        }, "notification-poller");
                    }
                    case BLOCK -> detector = new Thread(() -> {
                        for (long next = 1; next <= count; next++) {
                            counter.await(next, Duration.ofSeconds(10));
                            detectedAt[(int) next] = System.nanoTime();
                            detected.set(next);
                            LockSupport.unpark(driver);
                        }
                    }, "notification-blocker");
                }
                if (detector != null) {
                    detector.setDaemon(true);
                    detector.start();
                }
                try {
                    List<CompletableFuture<Completion>> writes = new ArrayList<>();
                    for (int i = 1; i <= count; i++) {
                        postedAt[i] = System.nanoTime();
                        writes.add(qp.writeWithNotify(source, source.address(), 8, target.address(), target.rkey(), counter.id()));
                        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                        while (detected.get() < i) {
                            if (System.nanoTime() > deadline) {
                                throw new IllegalStateException("notification: " + detection + " did not notice notification " + i + " within 10 s");
                            }
                            LockSupport.parkNanos(100_000);
                        }
                    }
                    for (CompletableFuture<Completion> write : writes) {
                        qp.await(write);
                    }
                } finally {
                    if (onNode != null) {
                        onNode.removeHandler(stamp);
                    }
                    if (handler != null) {
                        handler.close();
                    }
                    if (detector != null) {
                        detector.join(10_000);
                    }
                }
                for (int i = 1; i <= count; i++) {
                    timings.fromPost().recordValue(Math.max(0, detectedAt[i] - postedAt[i]));
                    if (onNode != null) {
                        timings.fromChange().recordValue(Math.max(0, detectedAt[i] - changedAt[i]));
                    }
                }
            }
            if (receiverMeters != null) {
                timings.nodeCalls().addAndGet(counterCallsServed(receiverMeters) - callsBefore);
            }
            timings.blocks().incrementAndGet();
        }
    }

    /**
     * The table and the claims, judged on the time from the counter's change to detection when the
     * receiving node ran in this JVM ({@code changeTimed}), else on the time from the write's post.
     */
    private static ExperimentResult result(Map<Detection, Timings> timings, boolean changeTimed) {
        List<List<Object>> rows = new ArrayList<>();
        double[] p50 = new double[Detection.values().length];
        List<String> names = new ArrayList<>();
        for (Detection d : Detection.values()) {
            Histogram judged = changeTimed ? timings.get(d).fromChange() : timings.get(d).fromPost();
            p50[d.ordinal()] = judged.getValueAtPercentile(50) / 1e3;
        }
        double poll = p50[Detection.POLL.ordinal()];
        for (Detection d : Detection.values()) {
            Timings t = timings.get(d);
            names.add(d.name().toLowerCase(Locale.ROOT));
            rows.add(List.of(d.name().toLowerCase(Locale.ROOT), t.fromPost().getTotalCount(), t.fromPost().getValueAtPercentile(50) / 1e3,
                    changeTimed ? (Object) p50[d.ordinal()] : "-",
                    changeTimed ? (Object) (t.fromChange().getValueAtPercentile(99) / 1e3) : "-", p50[d.ordinal()] - poll,
                    changeTimed ? (Object) t.nodeCalls().get() : "-"));
        }
        String measure = changeTimed ? "from the counter's change to detection" : "from the write's post to detection (the node runs elsewhere)";
        Map<String, double[][]> series = new LinkedHashMap<>();
        series.put((changeTimed ? "counter change" : "post") + " to detection, p50 (us)", new double[][] {new double[p50.length], p50});
        double handler = p50[Detection.HANDLER.ordinal()];
        double block = p50[Detection.BLOCK.ordinal()];
        List<Claim> claims = new ArrayList<>(List.of(
                new Claim("polling the counter is the cheapest way to notice a notification", poll <= handler && poll <= block,
                        String.format(Locale.ROOT, "p50 %s: poll %.1f us, handler %.1f us, block %.1f us", measure, poll, handler, block)),
                new Claim("blocking is the dearest", block >= handler && block >= poll,
                        String.format(Locale.ROOT, "block costs %.1f us more than polling at the median (NetVM: 14.5 us between its cheapest and"
                                + " dearest)", block - poll))));
        if (changeTimed) {
            // Why polling can be the cheapest at all: noticing is local. Counted, not timed, so it holds on any machine.
            boolean local = true;
            StringBuilder calls = new StringBuilder("counter reads and waits the receiving node served:");
            for (Detection d : Detection.values()) {
                Timings t = timings.get(d);
                local &= t.nodeCalls().get() <= t.blocks().get();
                calls.append(String.format(Locale.ROOT, " %s %d for %d notifications in %d blocks;", d.name().toLowerCase(Locale.ROOT),
                        t.nodeCalls().get(), t.fromPost().getTotalCount(), t.blocks().get()));
            }
            claims.add(new Claim("noticing needs no call to the node: a poll reads local memory, a wait is settled by the delivered change",
                    local, calls.append(" at most one per block, the new counter's subscription").toString()));
        }
        return new ExperimentResult(List.of("detection", "notifications", "post to detection p50 us", "change to detection p50 us",
                "change to detection p99 us", "over polling us", "counter calls to the node"), rows,
                new ExperimentResult.Plot("notification: " + measure, "detection",
                        "microseconds (p50)", false, series, names),
                claims);
    }
}
