package io.pagewire.node.trace;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The process's hop trace: while armed, the moment and thread of each step a message takes through the
 * node (a post read from an application's ring, a frame handed to or taken from a lane, a completion
 * written, a bell rung), kept in preallocated arrays and written out as text when the node stops, so
 * that {@code pagewire hops} can line them up with the verbs library's trace of the same run
 * ({@code PAGEWIRE_VERBS_HOP_TRACE}) and tell which hop a message's microseconds went to.
 *
 * <p>Times are {@link System#nanoTime}, which on Linux reads CLOCK_MONOTONIC, the clock the library's
 * trace reads: the node's and the programs' traces share one time line. Unarmed, a mark costs one
 * volatile read. The file also says what each thread that marked allocated on the heap since its first
 * mark, the allocation per message a breakdown divides out. One per process: a second node in the same
 * JVM is refused the trace, since the file could not tell the two nodes' hops apart.
 */
public final class HopTrace {
    /** The steps the node marks; the names are the trace file's words. */
    public enum Hop {
        /** A send-side post (a work request list) taken from an application's request ring. */
        POST_READ,
        /** A receive post taken from an application's request ring. */
        RECEIVE_READ,
        /** A frame carrying a request (data, READ, atomic) handed to a lane's gRPC stream. */
        LANE_SEND_REQUEST,
        /** A frame carrying only acknowledgements or responses handed to a lane's gRPC stream. */
        LANE_SEND_RESPONSE,
        /** A frame carrying a request handed to the node by a lane's gRPC stream. */
        LANE_RECEIVE_REQUEST,
        /** A frame carrying only acknowledgements or responses handed to the node by a lane. */
        LANE_RECEIVE_RESPONSE,
        /** A completion record committed on an application's event ring. */
        COMPLETION_WRITTEN,
        /** A byte written on the bell of an application asleep on it. */
        BELL_RUNG
    }

    private static final Hop[] HOPS = Hop.values();
    private static final com.sun.management.ThreadMXBean THREADS = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
    private static volatile HopTrace armed;

    private final Path file;
    private final String description;
    private final long[] times;
    /** Per event: the thread's id shifted left by 8, or'ed with the hop's ordinal plus one (0: not written yet). */
    private final long[] threadAndHop;
    private final AtomicInteger next = new AtomicInteger();
    /** The names of the threads that marked, taken when each first did (a thread may be gone when the file is written). */
    private final Map<Long, String> threadNames = new ConcurrentHashMap<>();
    /** What each thread that marked had allocated on the heap when it first did, so the file can say what it allocated since. */
    private final Map<Long, Long> allocatedAtFirstMark = new ConcurrentHashMap<>();
    private final ThreadLocal<Boolean> named = ThreadLocal.withInitial(() -> {
        long id = Thread.currentThread().getId();
        threadNames.put(id, Thread.currentThread().getName().replace(' ', '_'));
        allocatedAtFirstMark.put(id, THREADS.getCurrentThreadAllocatedBytes());
        return Boolean.TRUE;
    });

    private HopTrace(Path file, String description, int capacity) {
        this.file = file;
        this.description = description;
        this.times = new long[capacity];
        this.threadAndHop = new long[capacity];
    }

    /**
     * Arms the process's trace for {@code capacity} events, to be written to {@code file} by the returned
     * handle's {@link Armed#close}; null when another node of this process holds it already.
     */
    public static synchronized Armed arm(Path file, String description, int capacity) {
        if (armed != null) {
            return null;
        }
        HopTrace trace = new HopTrace(file, description, capacity);
        armed = trace;
        return new Armed(trace);
    }

    /** Whether a trace is armed: callers that must look inside a frame to name its hop ask first. */
    public static boolean isArmed() {
        return armed != null;
    }

    /** Marks {@code hop} now on the calling thread, if a trace is armed and has room; a null hop marks nothing. */
    public static void mark(Hop hop) {
        HopTrace trace = armed;
        if (trace != null && hop != null) {
            trace.record(hop, System.nanoTime());
        }
    }

    private void record(Hop hop, long now) {
        int i = next.getAndIncrement();
        if (i >= times.length) {
            return; // full: later events are counted, not kept
        }
        named.get();
        times[i] = now;
        threadAndHop[i] = Thread.currentThread().getId() << 8 | (hop.ordinal() + 1);
    }

    private void write() throws IOException {
        int kept = Math.min(next.get(), times.length);
        Path parent = file.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        try (BufferedWriter out = Files.newBufferedWriter(file, StandardCharsets.UTF_8)) {
            out.write("# pagewire hop trace: " + description + "; " + kept + " events kept of " + next.get() + "\n");
            for (Map.Entry<Long, Long> first : allocatedAtFirstMark.entrySet()) {
                long now = THREADS.getThreadAllocatedBytes(first.getKey());
                if (now >= 0) {
                    out.write("# thread " + threadNames.get(first.getKey()) + " allocated " + (now - first.getValue())
                            + " bytes since its first mark\n");
                }
            }
            out.write("# nanoseconds (CLOCK_MONOTONIC) hop thread\n");
            for (int i = 0; i < kept; i++) {
                long packed = threadAndHop[i];
                if (packed == 0) {
                    continue; // claimed but not written when the node stopped
                }
                long thread = packed >>> 8;
                out.write(times[i] + " " + HOPS[(int) (packed & 0xff) - 1].name() + " " + threadNames.getOrDefault(thread, "thread-" + thread)
                        + "\n");
            }
        }
    }

    /** The handle of an armed trace: closing it disarms the trace and writes its file. */
    public static final class Armed implements AutoCloseable {
        private final HopTrace trace;

        private Armed(HopTrace trace) {
            this.trace = trace;
        }

        public Path file() {
            return trace.file;
        }

        /** Disarms the trace and writes its file; an UncheckedIOException says why the file could not be written. */
        @Override
        public void close() {
            synchronized (HopTrace.class) {
                if (armed == trace) {
                    armed = null;
                }
            }
            try {
                trace.write();
            } catch (IOException e) {
                throw new UncheckedIOException("cannot write the hop trace " + trace.file + ": " + e.getMessage(), e);
            }
        }
    }
}
