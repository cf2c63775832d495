package io.pagewire.tools.perf;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.WorkRequest;
import io.pagewire.node.metrics.ProcessCpu;
import io.pagewire.ring.RingIdler;
import io.pagewire.tools.testbed.HeldResources;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongConsumer;
import java.util.function.LongSupplier;
import org.HdrHistogram.Histogram;

/**
 * The measurements of {@code pagewire perf}, after perftest's {@code ib_write_*}, {@code ib_read_*},
 * {@code ib_send_*} and {@code ib_atomic_*}, run through the public SDK between an endpoint on each
 * of two nodes. Bandwidth keeps {@code txDepth} requests in flight per queue pair against one buffer
 * per side, as perftest does (send_bw keeps receives posted on the far side, reposting each one that
 * completes, as ib_send_bw's rx depth; atomic_bw is FETCH_ADD on one 8-byte word); write and send
 * latency are ping-pongs (notified writes, or SENDs into posted receives) reported one way, half the
 * round trip, as ib_write_lat and ib_send_lat do; read and atomic latency are one request at a time
 * (a full round trip).
 */
public final class Perftest implements AutoCloseable {
    /** How long the nodes of a latency-mode run poll before they block (pagewire.node.busyPollNs). */
    public static final long BUSY_POLL_NS = 50_000;
    /** Work requests posted in one ring record (or stream message) when the window has room (perftest's {@code --post_list}). */
    public static final int POST_LIST = 16;
    /** Every this many requests one is signalled (perftest's {@code --cq-mod}, whose default this is). */
    public static final int CQ_MOD = 100;

    /** Which measurement. */
    public enum Test {
        WRITE_BW, WRITE_LAT, READ_BW, READ_LAT, SEND_BW, SEND_LAT, ATOMIC_BW, ATOMIC_LAT;

        public static Test parse(String value) {
            try {
                return valueOf(value.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("the test must be write_bw, write_lat, read_bw, read_lat, send_bw, send_lat, atomic_bw"
                        + " or atomic_lat, was '" + value + "'");
            }
        }

        public boolean bandwidth() {
            return name().endsWith("_BW");
        }

        /** Atomics move one 8-byte word, whatever size is asked for. */
        public boolean atomic() {
            return this == ATOMIC_BW || this == ATOMIC_LAT;
        }

        /** Latency reported one way, half a ping-pong's round trip (write_lat, send_lat). */
        public boolean pingPong() {
            return this == WRITE_LAT || this == SEND_LAT;
        }
    }

    /** One row of a bandwidth table (MB = 2^20 bytes, as perftest counts). */
    public record BandwidthRow(int bytes, long iterations, double peakMbPerSec, double averageMbPerSec, double messageRateMpps, long cpuNs) {
        /** CPU seconds (every process involved) per GB (10^9 bytes) moved. */
        public double cpuSecondsPerGb() {
            long moved = (long) bytes * iterations;
            return moved == 0 ? 0 : cpuNs / 1e9 / (moved / 1e9);
        }
    }

    /** One row of a latency table, in microseconds. */
    public record LatencyRow(int bytes, long iterations, double min, double max, double typical, double average, double stdev,
            double p99, double p999) {
    }

    private final Endpoint local;
    private final Endpoint remote;
    private final RegistrationMode mode;
    private final boolean busyPoll;
    /** CPU time of every process the measurement involves (the application and both nodes). */
    private LongSupplier cpuClock = ProcessCpu::nanos;
    private int postList = POST_LIST;
    private int cqMod = CQ_MOD;
    /** Every measured round trip of the latency tests, when asked for ({@code --samples}); else null. */
    private LatencySamples samples;

    public Perftest(Pagewire localNode, Pagewire remoteNode, RegistrationMode mode, boolean busyPoll) {
        this.local = localNode.openEndpoint("perf-local");
        this.remote = remoteNode.openEndpoint("perf-remote");
        this.mode = mode;
        this.busyPoll = busyPoll;
    }

    /** Bandwidth: requests per posted list. */
    public void postList(int value) {
        if (value < 1) {
            throw new IllegalArgumentException("--post-list must be at least 1, was " + value);
        }
        postList = value;
    }

    /** Bandwidth: every this many requests one is signalled (1 signals every one; at most the tx depth). */
    public void cqMod(int value) {
        if (value < 1) {
            throw new IllegalArgumentException("--cq-mod must be at least 1, was " + value);
        }
        cqMod = value;
    }

    /** How write_lat's receivers learn that a ping or pong landed. */
    public enum Arrival {
        /** Each side watches the last word of its buffer, as ib_write_lat does (both endpoints must map their node's memory). */
        MEMORY,
        /** Writes with notification; each side's event counter handler answers (NetVM's counters). */
        NOTIFICATION
    }

    private Arrival arrival;

    /** write_lat: watch memory or take notifications; by default memory when both endpoints map their node's memory. */
    public void arrival(Arrival value) {
        if (value == Arrival.MEMORY && !(local.sharesMemory() && remote.sharesMemory())) {
            throw new IllegalArgumentException("write_lat by watching memory needs both applications on their nodes' hosts,"
                    + " mapping the nodes' memory (shared memory on)");
        }
        arrival = value;
    }

    /** How write_lat detects arrivals in this run. */
    public Arrival arrival() {
        return arrival != null ? arrival : local.sharesMemory() && remote.sharesMemory() ? Arrival.MEMORY : Arrival.NOTIFICATION;
    }

    /** Where latency tests also record every measured round trip, or null. */
    public void recordSamples(LatencySamples value) {
        samples = value;
    }

    /** Counts CPU time with this clock from now on (the sum over the processes involved). */
    public void cpuClock(LongSupplier value) {
        cpuClock = value;
    }

    /** A buffer on an endpoint, written so that its pages are resident, then registered. */
    private MemoryRegion buffer(Endpoint endpoint, int size) {
        return buffer(endpoint, size, mode);
    }

    /** As {@link #buffer(Endpoint, int)}, registered in {@code in}. */
    private MemoryRegion buffer(Endpoint endpoint, int size, RegistrationMode in) {
        long address = endpoint.allocate(size);
        touch(endpoint, address, size);
        return endpoint.register(address, size, in, Access.all());
    }

    /**
     * Writes zeros over [address, +length) of {@code endpoint}'s memory, a megabyte per call (a call's
     * message stays far below gRPC's limit), so that its pages exist before the NIC sees them.
     */
    public static void touch(Endpoint endpoint, long address, long length) {
        byte[] zeros = new byte[(int) Math.min(length, 1 << 20)];
        for (long at = 0; at < length; at += zeros.length) {
            endpoint.store(address + at, at + zeros.length <= length ? zeros : new byte[(int) (length - at)]);
        }
    }

    /**
     * Keeps {@code txDepth} requests in flight on each of {@code queuePairs} queue pairs until
     * {@code iterations} completed (or {@code durationNs} passed, when positive), after a warm-up of
     * {@code warmupNs} on the same queue pairs and buffers that is not counted (perftest's warm-up
     * iterations: the JIT and the translations are warm when measuring starts).
     */
    public BandwidthRow bandwidth(Test test, int size, long iterations, long durationNs, long warmupNs, int queuePairs, int txDepth,
            LongConsumer progress) {
        try (HeldResources held = new HeldResources()) {
            List<QueuePair> qps = new ArrayList<>();
            List<MemoryRegion> sources = new ArrayList<>();
            List<MemoryRegion> targets = new ArrayList<>();
            for (int q = 0; q < queuePairs; q++) {
                sources.add(held.add(buffer(local, size)));
                MemoryRegion target = held.add(buffer(remote, size));
                targets.add(target);
                if (test == Test.SEND_BW) {
                    QueuePair mine = held.add(local.createQueuePair());
                    QueuePair theirs = held.add(remote.createQueuePair());
                    mine.connect(theirs.address());
                    theirs.connect(mine.address());
                    qps.add(mine);
                    held.add(new Reposter(theirs, target, size, Math.max(RX_DEPTH, 2 * txDepth)));
                } else {
                    qps.add(held.add(local.connect(remote)));
                }
            }
            if (warmupNs > 0) {
                stream(test, size, Long.MAX_VALUE, warmupNs, txDepth, qps, sources, targets, done -> { });
            }
            return stream(test, size, iterations, durationNs, txDepth, qps, sources, targets, progress);
        }
    }

    private BandwidthRow stream(Test test, int size, long iterations, long durationNs, int txDepth, List<QueuePair> qps,
            List<MemoryRegion> sources, List<MemoryRegion> targets, LongConsumer progress) {
        long cpuStart = cpuClock.getAsLong();
        Stream run = new Stream(test, size, iterations, durationNs, txDepth, qps, sources, targets, progress);
        run.start();
        // The queue pairs' completions drive the stream (each frees room that its callback fills
        // again), so this thread only waits for the end; busy-polling, it drains the rings itself.
        qps.get(0).await(run.finished);
        long elapsed = run.endNs - run.startNs;
        long cpu = cpuClock.getAsLong() - cpuStart;
        double average = mbPerSec(run.completed * size, elapsed);
        return new BandwidthRow(size, run.completed, Math.max(run.peak, average), average, run.completed / (elapsed / 1e9) / 1e6, cpu);
    }

    /**
     * One bandwidth run: every queue pair keeps {@code txDepth} requests in flight. Requests go out in
     * lists of {@code postList} (perftest's {@code --post_list}: one ring record per list) and every
     * {@code cqMod}-th is signalled (perftest's {@code --cq-mod}), as is the last of the run; each
     * signalled completion retires the requests posted since the one before it on its queue pair (RC
     * completes in order) and, on the thread that delivers it, posts as many again. Nothing waits per
     * request: perftest's loop does not, nor does the link baseline, which is driven from the
     * transport's callbacks.
     */
    private final class Stream {
        private final Test test;
        private final int size;
        private final long iterations;
        private final long durationNs;
        private final int txDepth;
        private final int cqMod;
        private final int listSize;
        private final List<QueuePair> qps;
        private final List<MemoryRegion> sources;
        private final List<MemoryRegion> targets;
        private final LongConsumer progress;
        /** One poster per queue pair at a time keeps requests in posting order; another that finds it busy leaves a note. */
        private final ReentrantLock[] posting;
        private final AtomicIntegerArray refillWanted;
        /** Guarded by this: requests posted and not retired, and posted since the last signalled one, per queue pair. */
        private final int[] inFlight;
        private final int[] sinceSignal;
        /** Ends when the last request is retired; its value (null) is not used: it is what {@link QueuePair#await} waits on. */
        final CompletableFuture<Completion> finished = new CompletableFuture<>();
        long startNs;
        long endNs;
        long completed;
        double peak;
        /** Guarded by this: requests each queue pair is to post (its share of the iterations), and has posted. */
        private final long[] quota;
        private final long[] postedOn;
        /** Guarded by this: the time is up; and whether every queue pair was told so. */
        private boolean stopped;
        private boolean stopKicked = true;
        private long windowStartNs;
        private long windowCompleted;
        private final long windowNs;
        private final long window;

        Stream(Test test, int size, long iterations, long durationNs, int txDepth, List<QueuePair> qps, List<MemoryRegion> sources,
                List<MemoryRegion> targets, LongConsumer progress) {
            if (txDepth < 1) {
                throw new IllegalArgumentException("--tx-depth must be at least 1, was " + txDepth);
            }
            this.test = test;
            this.size = size;
            this.iterations = iterations;
            this.durationNs = durationNs;
            this.txDepth = txDepth;
            // An atomic's result travels only in its completion: every one is signalled.
            this.cqMod = test.atomic() ? 1 : Math.min(Perftest.this.cqMod, txDepth);
            this.listSize = Math.min(postList, txDepth);
            this.qps = qps;
            this.sources = sources;
            this.targets = targets;
            this.progress = progress;
            this.posting = new ReentrantLock[qps.size()];
            for (int q = 0; q < qps.size(); q++) {
                posting[q] = new ReentrantLock();
            }
            this.refillWanted = new AtomicIntegerArray(qps.size());
            this.inFlight = new int[qps.size()];
            this.sinceSignal = new int[qps.size()];
            this.quota = new long[qps.size()];
            this.postedOn = new long[qps.size()];
            for (int q = 0; q < qps.size(); q++) {
                // perftest runs its iterations on every queue pair; here -n is the total, shared out.
                quota[q] = iterations == Long.MAX_VALUE ? Long.MAX_VALUE : iterations / qps.size() + (q < iterations % qps.size() ? 1 : 0);
            }
            // Peak is the best of about 20 windows of at least 100 ms each, so a burst of completions
            // that arrive together cannot pass for a rate the link never had.
            this.windowNs = Math.max(100_000_000L, durationNs / 20);
            this.window = Math.max(1, iterations / 20);
        }

        void start() {
            synchronized (this) {
                startNs = System.nanoTime();
                windowStartNs = startNs;
            }
            for (int q = 0; q < qps.size(); q++) {
                refill(q);
            }
        }

        /**
         * Posts lists on queue pair q while it has room and the run has requests left. A thread that
         * finds another posting there leaves it a note to look again instead of waiting (a completion
         * callback must never wait behind a poster that waits for ring room).
         */
        private void refill(int q) {
            refillWanted.set(q, 1);
            while (refillWanted.get(q) == 1 && posting[q].tryLock()) {
                try {
                    refillWanted.set(q, 0);
                    while (postOneList(q)) {
                        // keep posting while there is room
                    }
                } finally {
                    posting[q].unlock();
                }
            }
            boolean kickOthers;
            synchronized (this) {
                kickOthers = stopped && !stopKicked;
                stopKicked = true;
            }
            if (kickOthers) {
                // The time ran out on this queue pair's turn: the others end their streams too, now,
                // whether or not a completion of theirs is still coming.
                for (int other = 0; other < qps.size(); other++) {
                    if (other != q) {
                        refill(other);
                    }
                }
            }
        }

        /**
         * Posts one list on queue pair q, as long as the room it has (filling the window to the brim,
         * so with {@code cqMod <= txDepth} a signalled request is always in flight); false when it had
         * no room, or the run posted its last.
         */
        private boolean postOneList(int q) {
            List<WorkRequest> list;
            int[] spans;
            synchronized (this) {
                if (finished.isDone()) {
                    return false;
                }
                if (!stopped && durationNs > 0 && System.nanoTime() - startNs >= durationNs) {
                    stopped = true;
                    stopKicked = false;
                }
                long left = stopped ? 0 : quota[q] - postedOn[q];
                if (left <= 0) {
                    if (sinceSignal[q] == 0) {
                        endIfDrained();
                        return false;
                    }
                    // Time is up with requests in flight after this queue pair's last signalled one:
                    // they would never be retired; one more request, signalled, retires them (the
                    // window grows by one for it).
                    list = List.of(request(q, true));
                    spans = new int[] {sinceSignal[q] + 1};
                    sinceSignal[q] = 0;
                    inFlight[q]++;
                    postedOn[q]++;
                } else {
                    int count = (int) Math.min(Math.min(listSize, left), txDepth - inFlight[q]);
                    if (count <= 0) {
                        return false;
                    }
                    list = new ArrayList<>(count);
                    spans = new int[count];
                    for (int i = 0; i < count; i++) {
                        sinceSignal[q]++;
                        // The queue pair's last request is signalled too, or the ones before it would never be retired.
                        boolean signalled = sinceSignal[q] >= cqMod || postedOn[q] + i + 1 == quota[q];
                        if (signalled) {
                            spans[i] = sinceSignal[q];
                            sinceSignal[q] = 0;
                        }
                        list.add(request(q, signalled));
                    }
                    inFlight[q] += count;
                    postedOn[q] += count;
                }
            }
            List<CompletableFuture<Completion>> futures = qps.get(q).post(list);
            for (int i = 0; i < list.size(); i++) {
                int span = spans[i];
                if (span > 0) {
                    futures.get(i).whenComplete((done, error) -> retired(q, span, error));
                }
            }
            return true;
        }

        private WorkRequest request(int q, boolean signalled) {
            MemoryRegion src = sources.get(q);
            MemoryRegion dst = targets.get(q);
            WorkRequest wr = switch (test) {
                case WRITE_BW -> WorkRequest.write(src, src.address(), size, dst.address(), dst.rkey());
                case READ_BW -> WorkRequest.read(src, src.address(), size, dst.address(), dst.rkey());
                case SEND_BW -> WorkRequest.send(src, src.address(), size);
                case ATOMIC_BW -> WorkRequest.fetchAdd(dst.address(), dst.rkey(), 1);
                default -> throw new IllegalArgumentException(test + " is not a bandwidth test");
            };
            return signalled ? wr : wr.unsignaled();
        }

        /** A signalled completion on queue pair q retired {@code count} requests (or failed the run). */
        private void retired(int q, int count, Throwable error) {
            if (error != null) {
                finished.completeExceptionally(error);
                return;
            }
            long done;
            synchronized (this) {
                inFlight[q] -= count;
                completed += count;
                done = completed;
                if (done - windowCompleted >= window) {
                    long t = System.nanoTime();
                    if (t - windowStartNs >= windowNs) {
                        peak = Math.max(peak, mbPerSec((done - windowCompleted) * size, t - windowStartNs));
                        windowStartNs = t;
                        windowCompleted = done;
                    }
                }
                endIfDrained();
            }
            progress.accept(done);
            refill(q);
        }

        /** Guarded by this: once every queue pair has posted its last request and nothing is in flight, the run ends. */
        private void endIfDrained() {
            for (int q = 0; q < inFlight.length; q++) {
                if (inFlight[q] > 0 || (!stopped && postedOn[q] < quota[q])) {
                    return;
                }
            }
            if (!finished.isDone()) {
                endNs = System.nanoTime();
                finished.complete(null);
            }
        }
    }

    /** Receives the far side of send_bw keeps posted (ib_send_bw's default rx depth). */
    private static final int RX_DEPTH = 512;

    /**
     * Keeps {@code depth} receives posted on a queue pair into one buffer, posting one again as each
     * completes (perftest's receiver does the same), until closed.
     */
    private static final class Reposter implements AutoCloseable {
        private final QueuePair qp;
        private final MemoryRegion buffer;
        private final int size;
        private volatile boolean stopped;

        Reposter(QueuePair qp, MemoryRegion buffer, int size, int depth) {
            this.qp = qp;
            this.buffer = buffer;
            this.size = size;
            for (int i = 0; i < depth; i++) {
                post();
            }
        }

        private void post() {
            qp.postReceive(buffer, buffer.address(), size).whenComplete((done, error) -> {
                if (error == null && !stopped) {
                    post();
                }
            });
        }

        @Override
        public void close() {
            stopped = true;
        }
    }

    /** Write latency by ping-pong, or read latency one READ at a time; {@code warmup} rounds are not counted. */
    public LatencyRow latency(Test test, int size, long iterations, int warmup, LongConsumer progress) throws Exception {
        return latency(test, size, iterations, warmup, false, progress);
    }

    /**
     * As {@link #latency(Test, int, long, int, LongConsumer)}; with {@code freshPages}, every ping of
     * write_lat lands on a page the far side never touched, so each one takes a receive fault (minor:
     * the page gets its first frame) on the way in.
     */
    public LatencyRow latency(Test test, int size, long iterations, int warmup, boolean freshPages, LongConsumer progress) throws Exception {
        Histogram histogram = new Histogram(3_600_000_000_000L, 3);
        if (samples != null) {
            samples.reserve(iterations);
        }
        try (HeldResources held = new HeldResources()) {
            MemoryRegion mine = held.add(buffer(local, size));
            long pageSize = remote.pageSize();
            MemoryRegion theirs;
            if (freshPages && test == Test.WRITE_LAT) {
                long bytes = (iterations + warmup) * pageSize;
                theirs = held.add(remote.register(remote.allocate(bytes), bytes, mode, Access.all()));
            } else {
                theirs = held.add(buffer(remote, size));
            }
            long stride = freshPages ? pageSize : 0;
            QueuePair qp = test == Test.READ_LAT || test == Test.ATOMIC_LAT ? held.add(local.connect(remote)) : null;
            if (qp != null) {
                for (long i = 0; i < iterations + warmup; i++) {
                    long start = System.nanoTime();
                    qp.await(test == Test.ATOMIC_LAT ? qp.fetchAdd(theirs.address(), theirs.rkey(), 1)
                            : qp.read(mine, mine.address(), size, theirs.address(), theirs.rkey()));
                    if (i >= warmup) {
                        record(histogram, size, start, System.nanoTime());
                        progress.accept(i - warmup + 1);
                    }
                }
            } else if (test == Test.SEND_LAT) {
                sendPingPong(held, mine, theirs, size, iterations, warmup, histogram, progress);
            } else if (stride == 0 && arrival() == Arrival.MEMORY) {
                memoryPingPong(held, size, iterations, warmup, histogram, progress);
            } else {
                pingPong(mine, theirs, stride, size, iterations, warmup, histogram, progress);
            }
        }
        return row(test, size, histogram);
    }

    /** One measured round trip, into the row's histogram and, when asked for, the samples. */
    private void record(Histogram histogram, int size, long startNs, long endNs) {
        histogram.recordValue(endNs - startNs);
        if (samples != null) {
            samples.add(size, startNs, endNs - startNs);
        }
    }

    /** A latency row from round trips in nanoseconds (halved for a ping-pong, as perftest reports it). */
    private static LatencyRow row(Test test, int size, Histogram histogram) {
        double scale = test.pingPong() ? 2000.0 : 1000.0; // ns to us
        return new LatencyRow(size, histogram.getTotalCount(), histogram.getMinValue() / scale, histogram.getMaxValue() / scale,
                histogram.getValueAtPercentile(50) / scale, histogram.getMean() / scale, histogram.getStdDeviation() / scale,
                histogram.getValueAtPercentile(99) / scale, histogram.getValueAtPercentile(99.9) / scale);
    }

    private void pingPong(MemoryRegion mine, MemoryRegion theirs, long stride, int size, long iterations, int warmup, Histogram histogram,
            LongConsumer progress) throws Exception {
        // The far side answers every notification with one of its own, from its counter handler.
        try (HeldResources held = new HeldResources()) {
            pingPong(held, List.of(new PingTarget(mine, theirs, stride, histogram)), size, iterations, warmup, progress);
        }
    }

    /** Where the pings of one row of an interleaved write_lat go: a buffer on each side, and how far apart successive pings land. */
    private record PingTarget(MemoryRegion mine, MemoryRegion theirs, long stride, Histogram histogram) {
    }

    /** What one row of {@link #interleavedWriteLatency} pings: buffers in a registration mode, or pages never touched before. */
    public record Variant(RegistrationMode mode, boolean freshPages) {
        @Override
        public String toString() {
            return mode + (freshPages ? ", a page never touched each ping" : "");
        }
    }

    /**
     * write_lat over several variants at once, ping by ping in turn (ping i goes to variant i mod n),
     * so that what differs between them (a registration mode, a receive fault on a fresh page) is
     * measured in the same moments and the machine's drift, which moves a whole run by tens of
     * microseconds here, falls on all of them alike. One row per variant, in order.
     */
    public List<LatencyRow> interleavedWriteLatency(List<Variant> variants, int size, long iterations, int warmup) throws Exception {
        List<PingTarget> targets = new ArrayList<>();
        try (HeldResources held = new HeldResources()) {
            long pageSize = remote.pageSize();
            for (Variant v : variants) {
                MemoryRegion mine = held.add(buffer(local, size, v.mode()));
                MemoryRegion theirs;
                if (v.freshPages()) {
                    long bytes = (iterations + warmup) * pageSize;
                    theirs = held.add(remote.register(remote.allocate(bytes), bytes, v.mode(), Access.all()));
                } else {
                    theirs = held.add(buffer(remote, size, v.mode()));
                }
                targets.add(new PingTarget(mine, theirs, v.freshPages() ? pageSize : 0, new Histogram(3_600_000_000_000L, 3)));
            }
            pingPong(held, targets, size, iterations, warmup, done -> { });
        }
        List<LatencyRow> rows = new ArrayList<>();
        for (PingTarget t : targets) {
            rows.add(row(Test.WRITE_LAT, size, t.histogram()));
        }
        return rows;
    }

    /**
     * Ping-pongs notified writes, one ping in flight: ping i goes to target (i - 1) mod n, at its
     * buffer plus its stride times the rounds before, and the far side's counter handler answers it
     * into the same target's buffer here. {@code iterations} and {@code warmup} are per target.
     */
    private void pingPong(HeldResources held, List<PingTarget> targets, int size, long iterations, int warmup, LongConsumer progress)
            throws Exception {
        int n = targets.size();
        EventCounter arrivedThere = remote.createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        EventCounter arrivedHere = local.createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        QueuePair back = held.add(remote.createQueuePair());
        QueuePair forth = held.add(local.createQueuePair());
        back.connect(forth.address());
        forth.connect(back.address());
        PingPongCounts counts = new PingPongCounts();
        // A handler first sees the counter's value when it is installed: only a rise is a ping.
        held.add(arrivedThere.onChange(value -> {
            if (counts.ping(value)) {
                PingTarget t = targets.get((int) ((value - 1) % n));
                back.writeWithNotify(t.theirs(), t.theirs().address(), size, t.mine().address(), t.mine().rkey(), arrivedHere.id());
            }
        }));
        held.add(arrivedHere.onChange(counts::pong));
        long pings = (iterations + warmup) * n;
        for (long i = 1; i <= pings; i++) {
            PingTarget t = targets.get((int) ((i - 1) % n));
            long round = (i - 1) / n;
            long start = System.nanoTime();
            forth.writeWithNotify(t.mine(), t.mine().address(), size, t.theirs().address() + round * t.stride(), t.theirs().rkey(),
                    arrivedThere.id());
            long deadline = start + Duration.ofSeconds(30).toNanos();
            long spinUntil = start + BUSY_SPIN_NS;
            while (counts.pongs() < i) {
                if (busyPoll) {
                    // Both sides' events are handled here, as each side's polling thread would (the
                    // far side's handler answers the ping from this thread); then spin, yielding
                    // between looks: a waiter that never yields starves, on a 2-core machine, the
                    // node threads that bring its pong.
                    if (remote.poll() + local.poll() == 0) {
                        RingIdler.backOff(spinUntil);
                    }
                } else {
                    // Blocking, as the SDK waits for a counter: this thread sleeps until the node
                    // rings (on shared-memory rings it handles the events itself, the pong's handler
                    // among them), up to the deadline.
                    arrivedHere.await(i, Duration.ofNanos(Math.max(1, deadline - System.nanoTime())));
                }
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("no answer to ping " + i + " within 30 s (" + counts + ")");
                }
            }
            if (round >= warmup) {
                record(t.histogram(), size, start, System.nanoTime());
                progress.accept((round - warmup) * n + (i - 1) % n + 1);
            }
        }
        lastPingPong = counts;
    }

    /**
     * write_lat as ib_write_lat runs it: each side has a send area and a receive area; a ping stores
     * its sequence number in the send area's last word and WRITEs the area into the far side's
     * receive area; the far side's thread, watching the last word of its receive area (spinning, or
     * asleep until the node's bell), sees it change, stores it in its own send area and WRITEs it
     * back, where this thread watches. No notification and no completion is on the path: the WRITEs
     * are unsignalled but for one in {@link #cqMod} (which retires the ones before it).
     */
    private void memoryPingPong(HeldResources held, int size, long iterations, int warmup, Histogram histogram, LongConsumer progress)
            throws Exception {
        int area = (size + 7) & -8;
        int word = (size - 1) & -8; // the aligned word that holds the message's last byte
        MemoryRegion mine = held.add(buffer(local, 2 * area));
        MemoryRegion theirs = held.add(buffer(remote, 2 * area));
        QueuePair back = held.add(remote.createQueuePair());
        QueuePair forth = held.add(local.createQueuePair());
        back.connect(forth.address());
        forth.connect(back.address());
        long pings = iterations + warmup;
        long mask = size >= 8 ? -1L : (1L << (8 * size)) - 1;
        long myWord = mine.address() + area + word;
        long theirWord = theirs.address() + area + word;
        // Both read before the first ping can land: a side that looked only after it would wait for a second.
        long[] seenThere = {remote.loadLong(theirWord)};
        PingPongCounts counts = new PingPongCounts();
        long[] answered = {0};
        LongConsumer answer = now -> {
            seenThere[0] = now;
            counts.ping(++answered[0]);
            remote.storeLong(theirs.address() + word, now);
            WorkRequest pong = WorkRequest.write(theirs, theirs.address(), size, mine.address() + area, mine.rkey());
            back.post(List.of(now % cqMod == 0 ? pong : pong.unsignaled()));
        };
        CompletableFuture<Void> answering = null;
        if (!busyPoll) {
            // The far side's own thread, asleep on its word until the node's bell, as a second process would be.
            answering = CompletableFuture.runAsync(() -> {
                for (long i = 1; i <= pings; i++) {
                    long now = remote.awaitChange(theirWord, seenThere[0], Duration.ofSeconds(30));
                    if (now == seenThere[0]) {
                        throw new IllegalStateException("ping " + i + " did not arrive within 30 s");
                    }
                    answer.accept(now);
                }
            }, runnable -> {
                Thread t = new Thread(runnable, "perf-write-lat-responder");
                t.setDaemon(true);
                t.start();
            });
        }
        long seen = local.loadLong(myWord);
        for (long i = 1; i <= pings; i++) {
            long start = System.nanoTime();
            long deadline = start + Duration.ofSeconds(30).toNanos();
            local.storeLong(mine.address() + word, i);
            WorkRequest ping = WorkRequest.write(mine, mine.address(), size, theirs.address() + area, theirs.rkey());
            forth.post(List.of(i % cqMod == 0 ? ping : ping.unsignaled()));
            long now;
            if (busyPoll) {
                // One thread watches both words, as each side's spinning thread would (on a 2-core
                // machine a second spinner would take the core a node's loop needs), yielding
                // between looks after a short spin.
                long spinUntil = start + BUSY_SPIN_NS;
                while ((now = local.loadLong(myWord)) == seen && System.nanoTime() - deadline < 0) {
                    long there = remote.loadLong(theirWord);
                    if (there != seenThere[0]) {
                        answer.accept(there);
                    } else {
                        RingIdler.backOff(spinUntil);
                    }
                }
            } else {
                now = local.awaitChange(myWord, seen, Duration.ofNanos(deadline - start));
            }
            if (now == seen) {
                if (answering != null) {
                    answering.cancel(true);
                }
                throw new IllegalStateException("no answer to ping " + i + " within 30 s");
            }
            if ((now & mask) != (i & mask)) {
                throw new IllegalStateException("ping " + i + " was answered with " + now + ": the ping-pong lost its step");
            }
            seen = now;
            counts.pong(i);
            if (i > warmup) {
                record(histogram, size, start, System.nanoTime());
                progress.accept(i - warmup);
            }
        }
        if (answering != null) {
            answering.get(30, TimeUnit.SECONDS);
        }
        lastPingPong = counts;
    }

    /**
     * send_lat: a ping is a SEND into a receive the far side posted; the far side posts its next
     * receive, then answers with a SEND of its own, from the receive's completion. Each side posts its
     * receive before the SEND that will be answered, so no ping or pong meets an empty queue.
     */
    private void sendPingPong(HeldResources held, MemoryRegion mine, MemoryRegion theirs, int size, long iterations, int warmup,
            Histogram histogram, LongConsumer progress) {
        QueuePair back = held.add(remote.createQueuePair());
        QueuePair forth = held.add(local.createQueuePair());
        back.connect(forth.address());
        forth.connect(back.address());
        AtomicLong answered = new AtomicLong();
        Runnable answer = new Runnable() {
            @Override
            public void run() {
                back.postReceive(theirs, theirs.address(), size).whenComplete((ping, error) -> {
                    if (error == null) {
                        run();
                        answered.incrementAndGet();
                        back.send(theirs, theirs.address(), size);
                    }
                });
            }
        };
        answer.run();
        for (long i = 1; i <= iterations + warmup; i++) {
            CompletableFuture<Completion> pong = forth.postReceive(mine, mine.address(), size);
            long start = System.nanoTime();
            forth.send(mine, mine.address(), size);
            forth.await(pong);
            if (i > warmup) {
                record(histogram, size, start, System.nanoTime());
                progress.accept(i - warmup);
            }
        }
        lastSendPings = answered.get();
    }

    /** Pings the far side of the last send_lat answered: one per ping means one ping was in flight at a time. */
    long lastSendPings;

    /** How long a busy-polling ping-pong spins on its pong before it yields between looks. */
    private static final long BUSY_SPIN_NS = 20_000;

    /** The pings the far side answered and the pongs this side saw, by the counters' values. */
    public static final class PingPongCounts {
        private long pings;
        private volatile long pongs;

        /** @return whether {@code value} is a new ping, which must be answered once */
        synchronized boolean ping(long value) {
            if (value <= pings) {
                return false;
            }
            pings = value;
            return true;
        }

        void pong(long value) {
            if (value > pongs) {
                pongs = value;
            }
        }

        synchronized long pings() {
            return pings;
        }

        long pongs() {
            return pongs;
        }

        @Override
        public synchronized String toString() {
            return pings + " pings answered, " + pongs + " pongs seen";
        }
    }

    /** The counts of the last write_lat run: one pong per ping means one ping was in flight at a time. */
    PingPongCounts lastPingPong;

    private static double mbPerSec(long bytes, long ns) {
        return ns <= 0 ? 0 : bytes / (double) (1 << 20) / (ns / 1e9);
    }

    @Override
    public void close() {
        local.close();
        remote.close();
    }
}
