package io.pagewire.tools.cli;

import io.pagewire.client.Access;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.kernel.KernelCounter;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The chaos soak: nodes in one JVM over TLS on loopback, every ordered pair of nodes running one stream
 * per registration mode that cycles WRITE, WRITE_WITH_NOTIFY and SEND under memory pressure (more
 * registered than the nodes' memory), injected loss, duplication, reordering and delay, link cuts and
 * node restarts; the design's invariants are checked as it goes and at the end. Bounded in time and
 * count. A stream through a node that restarted begins again (what the node held went with it).
 */
final class Soak {
    /**
     * What to run.
     *
     * @param ringDirectory where the nodes share memory with applications on the host (null: their default)
     */
    record Settings(int nodes, long durationNs, long seed, double lossRate, double duplicateRate, double reorderRate, long delayNs,
            boolean linkCuts, boolean restarts, long maxOperations, Path ringDirectory) {
        Settings(int nodes, long durationNs, long seed, double lossRate, double duplicateRate, double reorderRate, long delayNs,
                boolean linkCuts, boolean restarts, long maxOperations) {
            this(nodes, durationNs, seed, lossRate, duplicateRate, reorderRate, delayNs, linkCuts, restarts, maxOperations, null);
        }
    }

    /** What else runs against the soak's nodes while its streams do (applications and programs that come and go). */
    interface Churn {
        /**
         * Runs until {@code deadline} or {@code stopping}; reports what breaks an invariant to {@code violation}.
         */
        void run(EmbeddedCluster cluster, long deadline, java.util.function.BooleanSupplier stopping, java.util.function.Consumer<String> violation);
    }

    /** What happened: the summary line's figures, and every violation seen. */
    record Result(long operations, long bytes, long failedUnderFaults, long rebuilt, long linkCuts, long restarts, long renewed,
            long faultsInjected, long nicFaults, long majorFaults, List<String> violations, double seconds) {
        String summary(Settings s) {
            return String.format("soak: %d nodes, %.0f s, seed %d: %,d operations, %.1f MiB moved, faults injected %,d (loss %.3f, duplication %.3f,"
                    + " reordering %.3f, delay %d us), %d link cuts and %d node restarts, %,d operations failed under them (%d queue pairs"
                    + " rebuilt, %d streams begun again after a restart),"
                    + " memory pressure: %,d NIC page faults (%,d from swap), invariant violations: %d", s.nodes(), seconds, s.seed(), operations,
                    bytes / 1048576.0, faultsInjected, s.lossRate(), s.duplicateRate(), s.reorderRate(), s.delayNs() / 1000, linkCuts,
                    restarts, failedUnderFaults, rebuilt, renewed, nicFaults, majorFaults, violations.size());
        }
    }

    static final int MESSAGE = 4096;
    private static final long OPERATION_TIMEOUT_S = 60;
    /** No restart this close to the end: time for the streams through the node to begin again before they are checked. */
    private static final long LAST_RESTART_BEFORE_END_NS = TimeUnit.SECONDS.toNanos(20);

    private final Settings settings;
    private final PrintWriter log;
    private final List<String> violations = new CopyOnWriteArrayList<>();
    private final AtomicLong operations = new AtomicLong();
    private final AtomicLong bytes = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private final AtomicLong rebuilt = new AtomicLong();
    private final AtomicLong cuts = new AtomicLong();
    /** Node restarts so far; a stream whose incarnation began before the latest may find its endpoints gone. */
    private final AtomicLong restarts = new AtomicLong();
    private final AtomicLong renewed = new AtomicLong();
    /** What nodes counted before they were restarted (a new incarnation counts from zero). */
    private final AtomicLong injectedBefore = new AtomicLong();
    private final AtomicLong nicFaultsBefore = new AtomicLong();
    private final AtomicLong majorFaultsBefore = new AtomicLong();
    private volatile boolean restarting;
    private volatile boolean stopping;

    private final Churn churn;

    Soak(Settings settings, PrintWriter log) {
        this(settings, log, null);
    }

    Soak(Settings settings, PrintWriter log, Churn churn) {
        this.settings = settings;
        this.log = log;
        this.churn = churn;
    }

    Result run() throws Exception {
        long started = System.nanoTime();
        try (EmbeddedCluster cluster = EmbeddedCluster.start(settings.nodes(), Transport.NETTY, c -> {
            // Memory pressure: every node registers more than its memory (see Stream's sizes).
            c.kernel().physicalMemoryBytes(4L << 20).swapBytes(64L << 20).memlockLimitBytes(2L << 20).systemBufferBytes(2L << 20);
            c.nic().ackTimeoutNs(50_000_000L).retryCount(7).rnrRetryCount(7).tlbEntries(64).tlbWays(4);
            c.fabric().lossRate(settings.lossRate()).duplicateRate(settings.duplicateRate()).reorderRate(settings.reorderRate())
                    .delayNs(settings.delayNs()).faultSeed(settings.seed());
            if (settings.ringDirectory() != null) {
                c.verbs().ringDirectory(settings.ringDirectory());
            }
        })) {
            List<Pagewire> connections = new ArrayList<>();
            List<Stream> streams = new ArrayList<>();
            List<Thread> threads = new ArrayList<>();
            try {
                for (PagewireNode node : cluster.nodes()) {
                    connections.add(Pagewire.connect(node.target(), cluster.connectOptions()));
                }
                int id = 0;
                for (int from = 0; from < settings.nodes(); from++) {
                    for (int to = 0; to < settings.nodes(); to++) {
                        if (from == to) {
                            continue;
                        }
                        for (RegistrationMode mode : RegistrationMode.values()) {
                            streams.add(new Stream(id++, connections.get(from), connections.get(to), mode));
                        }
                    }
                }
                long deadline = started + settings.durationNs();
                for (Stream stream : streams) {
                    Thread t = new Thread(() -> stream.run(deadline), "soak-stream-" + stream.id);
                    t.setDaemon(true);
                    threads.add(t);
                    t.start();
                }
                Thread cutter = null;
                if (settings.linkCuts() && settings.nodes() > 1) {
                    cutter = new Thread(() -> cutLinks(cluster, deadline), "soak-link-cutter");
                    cutter.setDaemon(true);
                    cutter.start();
                }
                Thread restarter = null;
                if (settings.restarts()) {
                    restarter = new Thread(() -> restartNodes(cluster, deadline), "soak-restarter");
                    restarter.setDaemon(true);
                    restarter.start();
                }
                Thread churning = null;
                if (churn != null) {
                    churning = new Thread(() -> churn.run(cluster, deadline, () -> stopping, this::violation), "soak-churn");
                    churning.setDaemon(true);
                    churning.start();
                }
                for (Thread t : threads) {
                    t.join(TimeUnit.NANOSECONDS.toMillis(settings.durationNs()) + TimeUnit.SECONDS.toMillis(3 * OPERATION_TIMEOUT_S));
                    if (t.isAlive()) {
                        violation(t.getName() + " did not finish: an operation hung");
                    }
                }
                if (churning != null) {
                    churning.join(TimeUnit.SECONDS.toMillis(3 * OPERATION_TIMEOUT_S));
                    if (churning.isAlive()) {
                        violation("the churn of applications and programs did not finish: something it waited on hung");
                    }
                }
                stopping = true;
                if (cutter != null) {
                    cutter.join(10_000);
                }
                if (restarter != null) {
                    restarter.join(60_000);
                }
                for (PagewireNode node : cluster.nodes()) {
                    for (PagewireNode peer : cluster.nodes()) {
                        if (node != peer) {
                            node.fabric().heal(peer.id());
                        }
                    }
                }
                for (Stream stream : streams) {
                    if (!stream.open) {
                        continue; // its renewal reported why
                    }
                    try {
                        stream.verifyAtEnd();
                    } catch (RuntimeException e) {
                        violation("stream " + stream.id + " could not be checked at the end: " + e);
                    }
                }
            } finally {
                stopping = true;
                for (Stream stream : streams) {
                    stream.close();
                }
                connections.forEach(Pagewire::close);
            }
            checkReleased(cluster);
            for (PagewireNode node : cluster.nodes()) {
                count(node);
                long failedBatches = node.fabric().batchesFailed();
                if (failedBatches > 0) {
                    violation(node.id() + ": " + failedBatches + " batches threw in the NIC");
                }
                for (NicCounter bug : List.of(NicCounter.PIN_ACCOUNTING_ERRORS, NicCounter.TIMER_TASK_FAILURES)) {
                    if (node.nic().counters().get(bug) > 0) {
                        violation(node.id() + ": " + bug + " = " + node.nic().counters().get(bug));
                    }
                }
            }
            return new Result(operations.get(), bytes.get(), failed.get(), rebuilt.get(), cuts.get(), restarts.get(), renewed.get(),
                    injectedBefore.get(), nicFaultsBefore.get(), majorFaultsBefore.get(),
                    List.copyOf(violations),
                    (System.nanoTime() - started) / 1e9);
        }
    }

    /** Adds what a node's incarnation counted (faults it injected, NIC page faults) to the run's totals. */
    private void count(PagewireNode node) {
        var kernel = node.kernel().counters();
        majorFaultsBefore.addAndGet(kernel.get(KernelCounter.NIC_FAULTS_MAJOR));
        nicFaultsBefore.addAndGet(kernel.get(KernelCounter.NIC_FAULTS_MINOR)
                + kernel.get(KernelCounter.NIC_FAULTS_MAJOR));
        var faults = node.fabric().faults();
        injectedBefore.addAndGet(faults.dropped() + faults.duplicated() + faults.reordered() + faults.delayedBatches());
    }

    /** Every session closed: each node's pins and frames back to zero. */
    private void checkReleased(EmbeddedCluster cluster) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        for (PagewireNode node : cluster.nodes()) {
            while (true) {
                var stats = node.kernel().stats();
                if (node.sessions() == 0 && stats.pinnedPages() == 0 && stats.residentPages() == 0) {
                    break;
                }
                if (System.nanoTime() > deadline) {
                    violation(node.id() + " kept " + node.sessions() + " sessions, " + stats.pinnedPages() + " pinned and " + stats.residentPages()
                            + " resident pages after every session ended");
                    break;
                }
                Thread.sleep(20);
            }
        }
    }

    private void cutLinks(EmbeddedCluster cluster, long deadline) {
        SplittableRandom random = new SplittableRandom(settings.seed() ^ 0x5eed);
        List<PagewireNode> nodes = cluster.nodes();
        while (!stopping && System.nanoTime() < deadline - TimeUnit.SECONDS.toNanos(2)) {
            sleep(1000 + random.nextInt(2000));
            PagewireNode a = nodes.get(random.nextInt(nodes.size()));
            PagewireNode b = nodes.get(random.nextInt(nodes.size()));
            if (a == b || stopping) {
                continue;
            }
            a.fabric().cut(b.id());
            b.fabric().cut(a.id());
            cuts.incrementAndGet();
            sleep(200 + random.nextInt(1300));
            a.fabric().heal(b.id());
            b.fabric().heal(a.id());
        }
    }

    /**
     * Restarts a node every 15 to 25 s, as a crash and a supervisor would: its memory, endpoints and
     * queue pairs end; its peers see the new incarnation and fail their pairs to it at once. None in the
     * run's last {@link #LAST_RESTART_BEFORE_END_NS}: every stream through the node has that long to begin again.
     */
    private void restartNodes(EmbeddedCluster cluster, long deadline) {
        SplittableRandom random = new SplittableRandom(settings.seed() ^ 0x4e57a47L);
        while (!stopping) {
            long pauseMs = 15_000 + random.nextInt(10_000);
            if (System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(pauseMs) > deadline - LAST_RESTART_BEFORE_END_NS) {
                return; // the streams through a node restarted later could not begin again and be checked
            }
            sleep(pauseMs);
            if (stopping) {
                return;
            }
            int i = 1 + random.nextInt(settings.nodes());
            restarting = true;
            try {
                restarts.incrementAndGet();
                count(cluster.node(i));
                cluster.restart(i);
            } catch (RuntimeException e) {
                violation("node-" + i + " did not come back after a restart: " + e.getMessage());
            } finally {
                restarting = false;
            }
        }
    }

    private void violation(String what) {
        violations.add(what);
        synchronized (log) {
            log.println("soak: VIOLATION " + what);
            log.flush();
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** The bytes of message {@code k} of stream {@code id}: its identity in the first 16 bytes, then bytes derived from both. */
    static byte[] pattern(int id, long k) {
        byte[] bytes = new byte[MESSAGE];
        ByteBuffer.wrap(bytes).putLong(id).putLong(k);
        long x = (id * 0x9E3779B97F4A7C15L) ^ (k * 0xC2B2AE3D27D4EB4FL);
        for (int i = 16; i < bytes.length; i += 8) {
            x ^= x << 13;
            x ^= x >>> 7;
            x ^= x << 17;
            ByteBuffer.wrap(bytes, i, 8).putLong(x);
        }
        return bytes;
    }

    /** Which message of its stream a buffer holds, or -1 when it is no message of that stream. */
    static long messageIn(int id, byte[] bytes) {
        ByteBuffer b = ByteBuffer.wrap(bytes);
        long stream = b.getLong();
        long k = b.getLong();
        return stream == id && k >= 0 && Arrays.equals(bytes, pattern(id, k)) ? k : -1;
    }

    /**
     * One sender endpoint and one receiver endpoint on two nodes, with a queue pair between them: message
     * k is a WRITE (k % 3 == 0), a WRITE_WITH_NOTIFY (1) or a SEND (2); writes go to slot k % slots of
     * the receiver's region.
     */
    private final class Stream {
        final int id;
        private final RegistrationMode mode;
        private final Pagewire from;
        private final Pagewire to;
        private final int slots;
        private Endpoint sender;
        private Endpoint receiver;
        private MemoryRegion source;
        private MemoryRegion target;
        private MemoryRegion receiveBuffers;
        private EventCounter counter;
        /** The node restarts this incarnation of the stream began after. */
        private long epoch;
        /** Per slot: the last write acknowledged, and writes that failed after it (they may or may not have landed). */
        private final long[] acknowledged;
        private final Map<Integer, List<Long>> unsure = new ConcurrentHashMap<>();
        /** Notify ordinal n (counter value after it) to its message, for the notification check. */
        private final Map<Long, Long> notifyMessage = new ConcurrentHashMap<>();
        private final LinkedBlockingQueue<Long> notified = new LinkedBlockingQueue<>();
        private long notifies;
        private long lastSeenCount;
        private long lastSendReceived = -1;
        private QueuePair out;
        private volatile QueuePair in;
        /** Whether an incarnation is open: false from a restart's renewal until it opened again (then there is nothing to check). */
        private volatile boolean open;
        /** Receive buffers whose message arrived, to check and post again (on the stream's own thread). */
        private final LinkedBlockingQueue<Integer> received = new LinkedBlockingQueue<>();
        private static final int RECEIVES = 8;

        Stream(int id, Pagewire from, Pagewire to, RegistrationMode mode) {
            this.id = id;
            this.mode = mode;
            this.from = from;
            this.to = to;
            this.slots = mode == RegistrationMode.PINNED ? 16 : 256;
            this.acknowledged = new long[slots];
            open();
        }

        /** A new incarnation: both endpoints, their regions, the counter and the queue pairs, with nothing known about them yet. */
        private void open() {
            epoch = restarts.get();
            Arrays.fill(acknowledged, -1);
            unsure.clear();
            notifyMessage.clear();
            notified.clear();
            received.clear();
            notifies = 0;
            lastSeenCount = 0;
            lastSendReceived = -1;
            sender = from.openEndpoint("soak-" + id + "-out");
            receiver = to.openEndpoint("soak-" + id + "-in");
            long src = sender.allocate(MESSAGE);
            source = sender.register(src, MESSAGE, RegistrationMode.PINNED, Access.all());
            long dst = receiver.allocate((long) slots * MESSAGE);
            target = receiver.register(dst, (long) slots * MESSAGE, mode, Access.all());
            long recv = receiver.allocate((long) RECEIVES * MESSAGE);
            receiveBuffers = receiver.register(recv, (long) RECEIVES * MESSAGE, mode, Access.all());
            counter = receiver.createEventCounter(Access.all());
            counter.onChange(notified::add);
            connect();
            open = true;
        }

        /**
         * A node of this stream restarted: what its endpoints held is gone with it (legitimately), so the
         * stream starts a new incarnation once the node serves again; what it checked so far stands.
         */
        private void renew(long deadline) {
            close();
            open = false;
            RuntimeException lastRefusal = null;
            while (!stopping && System.nanoTime() < deadline) {
                try {
                    open();
                    renewed.incrementAndGet();
                    return;
                } catch (RuntimeException notYet) {
                    lastRefusal = notYet;
                    close();
                    sleep(200);
                }
            }
            if (!stopping) {
                violation("stream " + id + " (" + mode + ") could not begin again after a node restart before the end: " + lastRefusal);
            }
        }
        private void connect() {
            out = sender.createQueuePair();
            in = receiver.createQueuePair();
            for (int i = 0; i < RECEIVES; i++) {
                postReceive(in, i);
            }
            out.connect(in.address());
            in.connect(out.address());
        }

        private void postReceive(QueuePair qp, int buffer) {
            long address = receiveBuffers.address() + (long) buffer * MESSAGE;
            qp.postReceive(receiveBuffers, address, MESSAGE).whenComplete((c, error) -> {
                if (error == null && qp == in) {
                    received.add(buffer);
                }
            });
        }

        /** Checks each arrived SEND (exactly once, in order) and posts its buffer again. */
        private void drainReceives() {
            Integer buffer;
            while ((buffer = received.poll()) != null) {
                long k = messageIn(id, receiver.load(receiveBuffers.address() + (long) buffer * MESSAGE, MESSAGE));
                long expected = lastSendReceived < 0 ? -1 : lastSendReceived + 3;
                if (k < 0 || k % 3 != 2 || (expected >= 0 && k != expected)) {
                    violation("stream " + id + " (" + mode + "): a receive holds message " + k + ", expected "
                            + (expected < 0 ? "a SEND" : String.valueOf(expected)) + " (exactly once, in order)");
                }
                lastSendReceived = k;
                postReceive(in, buffer);
            }
        }

        void run(long deadline) {
            try {
                while (!stopping && System.nanoTime() < deadline && operations.get() < settings.maxOperations()) {
                    try {
                        if (!runIncarnation(deadline)) {
                            return;
                        }
                    } catch (RuntimeException e) {
                        if (stopping) {
                            return;
                        }
                        if (restarts.get() == epoch && !restarting) {
                            violation("stream " + id + " (" + mode + ") stopped: " + e);
                            return;
                        }
                        renew(deadline);
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        /** Runs until the deadline (true) or a hang (false); a node restart surfaces as an exception. */
        private boolean runIncarnation(long deadline) throws InterruptedException {
            long k = 0;
            while (!stopping && System.nanoTime() < deadline && operations.get() < settings.maxOperations()) {
                checkNotifications();
                drainReceives();
                byte[] data = pattern(id, k);
                sender.store(source.address(), data);
                int slot = (int) (k % slots);
                long remote = target.address() + (long) slot * MESSAGE;
                int kind = (int) (k % 3);
                long ordinal = 0;
                var future = switch (kind) {
                    case 0 -> out.write(source, source.address(), MESSAGE, remote, target.rkey());
                    case 1 -> {
                        ordinal = ++notifies;
                        notifyMessage.put(ordinal, k);
                        yield out.writeWithNotify(source, source.address(), MESSAGE, remote, target.rkey(), counter.id());
                    }
                    default -> out.send(source, source.address(), MESSAGE);
                };
                try {
                    future.get(OPERATION_TIMEOUT_S, TimeUnit.SECONDS);
                } catch (ExecutionException e) {
                    failed.incrementAndGet();
                    if (kind != 2) {
                        unsure.computeIfAbsent(slot, s -> new CopyOnWriteArrayList<>()).add(k);
                    }
                    if (kind == 1) {
                        notifies--;
                        notifyMessage.remove(ordinal);
                    }
                    rebuild();
                    k++;
                    continue;
                } catch (TimeoutException e) {
                    if (restarts.get() != epoch) {
                        throw new IllegalStateException("a node restarted while message " + k + " was in flight", e);
                    }
                    violation("stream " + id + " (" + mode + "): message " + k + " did not complete in " + OPERATION_TIMEOUT_S + " s");
                    return false;
                }
                operations.incrementAndGet();
                bytes.addAndGet(MESSAGE);
                if (kind != 2) {
                    long there = messageIn(id, receiver.load(remote, MESSAGE));
                    if (there != k) {
                        violation("stream " + id + " (" + mode + "): slot " + slot + " holds message " + there + " after message " + k
                                + " was acknowledged");
                    }
                    acknowledged[slot] = k;
                    unsure.remove(slot);
                }
                k++;
            }
            return true;
        }

        /** Counter values seen so far: never lower than before, and each one's data already in place. */
        private void checkNotifications() {
            Long value;
            while ((value = notified.poll()) != null) {
                if (value < lastSeenCount) {
                    violation("stream " + id + ": counter went from " + lastSeenCount + " back to " + value);
                }
                lastSeenCount = Math.max(lastSeenCount, value);
                // Values only grow: the ordinals below this one are never looked up again.
                long seen = value;
                notifyMessage.keySet().removeIf(ordinal -> ordinal < seen);
                Long k = notifyMessage.get(value);
                if (k == null) {
                    continue; // a notify that failed (the count may still include it), or the initial value
                }
                int slot = (int) (k % slots);
                long there = messageIn(id, receiver.load(target.address() + (long) slot * MESSAGE, MESSAGE));
                if (there < k) {
                    violation("stream " + id + " (" + mode + "): counter reached " + value + " before the data of message " + k + " (slot "
                            + slot + " holds " + there + ")");
                }
            }
        }

        /** After a failure: both ends' queue pairs replaced, as an application recovers from a queue pair in ERROR. */
        private void rebuild() {
            QueuePair oldOut = out;
            QueuePair oldIn = in;
            in = null;
            oldIn.close();
            oldOut.close();
            received.clear();
            lastSendReceived = -1;
            // The old pairs can land nothing more: from here counter values map to the notifies still to come.
            notifies = counter.value();
            notifyMessage.clear();
            connect();
            rebuilt.incrementAndGet();
        }

        /** Nothing acknowledged lost: each slot holds its last acknowledged message, or one written after it that failed. */
        void verifyAtEnd() {
            for (int slot = 0; slot < slots; slot++) {
                long there = messageIn(id, receiver.load(target.address() + (long) slot * MESSAGE, MESSAGE));
                long acked = acknowledged[slot];
                List<Long> maybe = unsure.getOrDefault(slot, List.of());
                if (there != acked && !maybe.contains(there)) {
                    violation("stream " + id + " (" + mode + "): slot " + slot + " holds message " + there + " at the end; the last acknowledged was "
                            + acked + (maybe.isEmpty() ? "" : ", failed since: " + maybe));
                }
            }
            checkNotifications();
        }

        void close() {
            try {
                sender.close();
            } catch (RuntimeException e) {
                // the node may be gone
            }
            try {
                receiver.close();
            } catch (RuntimeException e) {
                // the node may be gone
            }
        }
    }
}
