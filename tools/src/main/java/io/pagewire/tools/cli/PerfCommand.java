package io.pagewire.tools.cli;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.Transport;
import io.pagewire.node.metrics.ProcessCpu;
import io.pagewire.tools.perf.LatencySamples;
import io.pagewire.tools.perf.NodeProbe;
import io.pagewire.tools.perf.Perftest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.tools.testbed.HeldResources;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletionException;
import java.util.function.LongConsumer;
import java.util.function.LongSupplier;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/** {@code pagewire perf}: the perftest of Pagewire, with perftest's columns. */
@Command(name = "perf", mixinStandardHelpOptions = true,
        description = {"Measures bandwidth or latency between two nodes, like perftest's ib_write_*, ib_read_*, ib_send_*",
            "and ib_atomic_*. With no addresses it starts an embedded pair in this JVM (loopback gRPC).",
            "MB is 2^20 bytes. write_lat and send_lat are half a ping-pong round trip; read_lat and atomic_lat are a",
            "full round trip. Atomics (FETCH_ADD on one word) are 8 bytes whatever --size says."})
final class PerfCommand implements Callable<Integer> {
    /** How long an embedded node's idle event loop polls before it blocks, with --busy-poll. */

    @Spec
    CommandSpec spec;

    @Parameters(index = "0", paramLabel = "TEST", description = "write_bw, write_lat, read_bw, read_lat, send_bw, send_lat, atomic_bw or atomic_lat")
    String test;

    @Parameters(index = "1", arity = "0..2", paramLabel = "HOST:PORT", description = "The requester's node, then the responder's.")
    List<String> targets = new ArrayList<>();

    @Mixin
    ClientSecurityOptions security = new ClientSecurityOptions();

    @Option(names = {"-s", "--size"}, paramLabel = "BYTES", description = "Message size (default 65536 for bandwidth, 2 for latency).")
    Integer size;

    @Option(names = {"-a", "--all"}, description = "Every size from 2 bytes to 8 MiB, in powers of two.")
    boolean all;

    @Option(names = {"-n", "--iterations"}, description = "Iterations per size (default 5000 for bandwidth, 1000 for latency).")
    Long iterations;

    @Option(names = {"-D", "--duration"}, paramLabel = "SECONDS", description = "Run each size this long instead of -n (bandwidth).")
    Integer duration;

    @Option(names = {"-q", "--qp"}, description = "Queue pairs (bandwidth).", defaultValue = "1")
    int queuePairs;

    @Option(names = {"-t", "--tx-depth"}, description = "Requests in flight per queue pair (bandwidth).", defaultValue = "128")
    int txDepth;

    @Option(names = "--cq-mod", description = "Bandwidth: one request in this many is signalled (perftest's default, ${DEFAULT-VALUE};"
            + " at most the tx depth; 1 signals every request).", defaultValue = "" + Perftest.CQ_MOD)
    int cqMod;

    @Option(names = "--post-list", description = "Bandwidth: requests posted together in one list (default ${DEFAULT-VALUE}).",
            defaultValue = "" + Perftest.POST_LIST)
    int postList;

    @Option(names = "--mode", description = "Registration mode of both buffers: ${COMPLETION-CANDIDATES}.", defaultValue = "PINNED")
    RegistrationMode mode;

    @Option(names = "--busy-poll", description = {"Spin on completions instead of blocking (lower latency, one core busy);",
        "the SDK's channel then runs its callbacks on the transport thread (direct executor)."})
    boolean busyPoll;

    @Option(names = "--notify", description = {"write_lat: each side learns of the other's write from a notification (an event",
        "counter) instead of watching the last word of its buffer, as ib_write_lat does (the default when both",
        "applications map their nodes' memory; without it, notifications are used anyway)."})
    boolean notify;

    @Option(names = "--warmup", paramLabel = "SECONDS", description = "Bandwidth: stream this long before measuring, not counted (default ${DEFAULT-VALUE}).",
            defaultValue = "3")
    double warmupSeconds;

    @Option(names = "--baseline", paramLabel = "KIND", description = {"Also measure the link under Pagewire: 'grpc' streams raw bytes",
        "(bandwidth) or ping-pongs (latency) over a plain gRPC stream between the same two nodes, same channel and",
        "settings as the lanes, and prints it beside each row with the ratio."})
    String baseline;

    @Option(names = "--max-bytes", paramLabel = "BYTES", description = "With -a, cap the bytes moved per size (default 256 MiB).",
            defaultValue = "268435456")
    long maxBytesPerSize;

    @Option(names = "--json", description = "Print the results as JSON instead of a table.")
    boolean json;

    @Option(names = "--samples", paramLabel = "FILE", description = {"Latency: also write every measured round trip (not the baseline's) to FILE as CSV",
        "(bytes,start_ns,elapsed_ns) in the order taken, as perftest's --report-unsorted prints them. start_ns is",
        "CLOCK_MONOTONIC, the clock of 'perf sched record -k CLOCK_MONOTONIC': a slow round trip can be matched with",
        "what the machine ran at that moment."})
    Path samplesFile;

    /** The round trips --samples asked for, or null. */
    private LatencySamples samples;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        Perftest.Test which;
        try {
            which = Perftest.Test.parse(test);
            if (targets.size() == 1) {
                throw new IllegalArgumentException("give two node addresses (requester, responder), or none for an embedded pair");
            }
            if (queuePairs < 1 || txDepth < 1) {
                throw new IllegalArgumentException("--qp and --tx-depth must be at least 1");
            }
            if (baseline != null && !baseline.equals("grpc")) {
                throw new IllegalArgumentException("--baseline takes 'grpc', was '" + baseline + "'");
            }
            if (warmupSeconds < 0) {
                throw new IllegalArgumentException("--warmup must not be negative");
            }
            if (samplesFile != null && which.bandwidth()) {
                throw new IllegalArgumentException("--samples writes the round trips of a latency test; " + test + " measures bandwidth");
            }
        } catch (IllegalArgumentException e) {
            err.println("pagewire perf: " + e.getMessage());
            err.flush();
            return 2;
        }
        List<Integer> sizes = new ArrayList<>();
        if (which.atomic()) {
            sizes.add(8); // an atomic moves one 8-byte word, as ib_atomic_* report
        } else if (all) {
            for (int s = 2; s <= 8 << 20; s <<= 1) {
                sizes.add(s);
            }
        } else {
            sizes.add(size != null ? size : which.bandwidth() ? 65536 : 2);
        }
        long n = iterations != null ? iterations : which.bandwidth() ? 5000 : 1000;
        Writer samplesOut = null;
        if (samplesFile != null) {
            // Opened before anything is measured: a path that cannot be written fails the command at once.
            try {
                samplesOut = Files.newBufferedWriter(samplesFile);
            } catch (IOException e) {
                err.println("pagewire perf: cannot write the --samples file " + samplesFile + ": " + e);
                err.flush();
                return 2;
            }
            samples = new LatencySamples();
        }
        int code = 1;
        try {
            code = measure(which, sizes, n, out, err);
        } finally {
            // The round trips measured so far are written whatever ended the run.
            if (samplesOut != null && !writeSamples(samplesOut, err) && code == 0) {
                code = 1;
            }
        }
        return code;
    }

    private int measure(Perftest.Test which, List<Integer> sizes, long n, PrintWriter out, PrintWriter err) throws Exception {
        // Whatever ends the run, what was measured is printed, and its own error is the one reported.
        List<String> rows = new ArrayList<>();
        try (HeldResources held = new HeldResources()) {
            return run(held, which, sizes, n, rows, out);
        } catch (RuntimeException e) {
            if (json && !rows.isEmpty()) {
                out.println("[" + String.join(",\n ", rows) + "]");
                out.flush();
            }
            err.println("pagewire perf: " + (rows.isEmpty() ? "" : "stopped after " + rows.size() + " size(s): ") + describe(e));
            err.flush();
            return 1;
        }
    }

    /** Writes the round trips measured so far and closes the file; false (said on {@code err}) when that failed. */
    private boolean writeSamples(Writer to, PrintWriter err) {
        try (Writer w = to) {
            samples.writeCsv(w);
            return true;
        } catch (IOException e) {
            err.println("pagewire perf: writing the --samples file " + samplesFile + " failed: " + e);
            err.flush();
            return false;
        }
    }

    private static String describe(Throwable e) {
        String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        return e.getCause() != null && e instanceof CompletionException ? describe(e.getCause()) : message;
    }

    private int run(HeldResources held, Perftest.Test which, List<Integer> sizes, long n, List<String> rows, PrintWriter out) throws Exception {
        EmbeddedCluster pair = null;
        Pagewire requester;
        Pagewire responder;
        if (targets.isEmpty()) {
            // Each side holds one buffer of the largest size per queue pair (two for latency), with room to spare.
            long largest = sizes.get(sizes.size() - 1);
            long memory = Math.max(64L << 20, Long.highestOneBit(4 * largest * queuePairs + (16L << 20)) * 2);
            // --busy-poll puts the nodes' event loops in latency mode too: they poll before they block.
            // The embedded pair measures the emulator over a plain link (a local experiment, said so explicitly).
            pair = held.add(EmbeddedCluster.start(2, Transport.NETTY, c -> {
                c.security().plaintext();
                c.busyPollNs(busyPoll ? Perftest.BUSY_POLL_NS : 0).kernel().physicalMemoryBytes(memory).memlockLimitBytes(memory / 2)
                        .systemBufferBytes(8L << 20);
            }));
        }
        String requesterTarget = pair == null ? targets.get(0) : pair.node(1).target();
        String responderTarget = pair == null ? targets.get(1) : pair.node(2).target();
        ClientSecurity security = pair == null ? this.security.security() : pair.clientSecurity();
        ConnectOptions options = ConnectOptions.defaults().withBusyPoll(busyPoll).withSecurity(security);
        requester = held.add(Pagewire.connect(requesterTarget, options));
        responder = held.add(Pagewire.connect(responderTarget, options));
        NodeProbe requesterProbe = held.add(new NodeProbe(requesterTarget, security));
        NodeProbe responderProbe = held.add(new NodeProbe(responderTarget, security));
        try (Perftest perftest = new Perftest(requester, responder, mode, busyPoll)) {
            // CPU of everything involved: this process, and the nodes when they are processes of their own.
            boolean embedded = pair != null;
            LongSupplier cpu = () -> ProcessCpu.nanos()
                    + (embedded ? 0 : requesterProbe.cpuNs() + responderProbe.cpuNs());
            perftest.cpuClock(cpu);
            perftest.recordSamples(samples);
            perftest.postList(postList);
            perftest.cqMod(cqMod);
            if (notify) {
                perftest.arrival(Perftest.Arrival.NOTIFICATION);
            }
            String responderId = responderProbe.describe().getNodeId();
            String where = pair == null ? targets.get(0) + " -> " + targets.get(1) : "embedded pair over loopback";
            if (!json) {
                out.printf("# %s, %s, mode %s, %s%n", which.name().toLowerCase(Locale.ROOT), where, mode,
                        which.bandwidth() ? queuePairs + " queue pair(s), tx depth " + txDepth : "one request at a time"
                                + (which == Perftest.Test.WRITE_LAT ? (perftest.arrival() == Perftest.Arrival.MEMORY
                                ? ", arrivals seen by watching memory" : ", arrivals by notification") : ""));
                out.println(which.bandwidth() ? bandwidthHeader() : latencyHeader());
                out.flush();
            }
            Progress progress = new Progress(spec.commandLine().getErr());
            for (int s : sizes) {
                long count = duration != null && which.bandwidth() ? Long.MAX_VALUE : all ? Math.max(2, Math.min(n, maxBytesPerSize / s)) : n;
                LongConsumer tick = progress.forSize(which.name().toLowerCase(Locale.ROOT), s, duration == null ? count : 0);
                String row;
                if (which.bandwidth()) {
                    long durationNs = duration == null ? 0 : duration * 1_000_000_000L;
                    long warmupNs = (long) (warmupSeconds * 1e9);
                    Perftest.BandwidthRow r = perftest.bandwidth(which, s, count, durationNs, warmupNs, queuePairs, txDepth, tick);
                    Perftest.BandwidthRow link = null;
                    if (baseline != null) {
                        link = requesterProbe.linkBandwidth(responderId, s, durationNs > 0 ? Long.MAX_VALUE : count, warmupNs, durationNs, cpu);
                    }
                    row = json ? json(r, link) : bandwidthRow(r, link);
                } else {
                    Perftest.LatencyRow r = perftest.latency(which, s, count, (int) Math.min(1000, count), tick);
                    Perftest.LatencyRow link = null;
                    if (baseline != null) {
                        // A READ is a full round trip; write_lat, like ib_write_lat, reports half of one.
                        link = requesterProbe.linkPingPong(responderId, s, count, Math.min(1000, count), which.pingPong());
                    }
                    row = json ? json(r, link) : latencyRow(r, link);
                }
                progress.done();
                rows.add(row);
                if (!json) {
                    out.println(row);
                    out.flush();
                }
            }
            if (json) {
                out.println("[" + String.join(",\n ", rows) + "]");
                out.flush();
            }
        }
        return 0;
    }

    static String bandwidthRow(Perftest.BandwidthRow r, Perftest.BandwidthRow link) {
        String row = String.format(Locale.ROOT, " %-10d %-14d %-18.2f %-20.2f %-14.6f %.3f", r.bytes(), r.iterations(),
                r.peakMbPerSec(), r.averageMbPerSec(), r.messageRateMpps(), r.cpuSecondsPerGb());
        if (link == null) {
            return row;
        }
        return row + String.format(Locale.ROOT, "%n %-10s %-14d %-18s %-20.2f %-14.6f %.3f%n # pagewire / grpc: bandwidth %.2fx, CPU per GB %.2fx",
                "grpc", link.iterations(), "-", link.averageMbPerSec(), link.messageRateMpps(), link.cpuSecondsPerGb(),
                r.averageMbPerSec() / link.averageMbPerSec(), r.cpuSecondsPerGb() / link.cpuSecondsPerGb());
    }

    static String latencyRow(Perftest.LatencyRow r, Perftest.LatencyRow link) {
        String row = String.format(Locale.ROOT, " %-7d %-13d %-14.2f %-14.2f %-16.2f %-14.2f %-16.2f %-22.2f %.2f",
                r.bytes(), r.iterations(), r.min(), r.max(), r.typical(), r.average(), r.stdev(), r.p99(), r.p999());
        if (link == null) {
            return row;
        }
        return row + String.format(Locale.ROOT, "%n %-7s %-13d %-14.2f %-14.2f %-16.2f %-14.2f %-16s %-22.2f %.2f%n"
                + " # pagewire / grpc: typical %.2fx, p99 %.2fx", "grpc", link.iterations(), link.min(), link.max(), link.typical(),
                link.average(), "-", link.p99(), link.p999(), r.typical() / link.typical(), r.p99() / link.p99());
    }

    static String bandwidthHeader() {
        return String.format(" %-10s %-14s %-18s %-20s %-14s %s", "#bytes", "#iterations", "BW peak[MB/sec]", "BW average[MB/sec]",
                "MsgRate[Mpps]", "CPU[s/GB]");
    }

    static String latencyHeader() {
        return String.format(" %-7s %-13s %-14s %-14s %-16s %-14s %-16s %-22s %s", "#bytes", "#iterations", "t_min[usec]", "t_max[usec]",
                "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]", "99% percentile[usec]", "99.9% percentile[usec]");
    }

    private String json(Perftest.BandwidthRow r, Perftest.BandwidthRow link) {
        String base = link == null ? "" : String.format(Locale.ROOT, ",\"grpc_bw_average_mb_per_sec\":%.2f,\"grpc_cpu_s_per_gb\":%.4f",
                link.averageMbPerSec(), link.cpuSecondsPerGb());
        return String.format(Locale.ROOT, "{\"test\":\"%s\",\"mode\":\"%s\",\"bytes\":%d,\"iterations\":%d,\"bw_peak_mb_per_sec\":%.2f,"
                + "\"bw_average_mb_per_sec\":%.2f,\"msg_rate_mpps\":%.6f,\"cpu_s_per_gb\":%.4f%s}", test, mode, r.bytes(), r.iterations(),
                r.peakMbPerSec(), r.averageMbPerSec(), r.messageRateMpps(), r.cpuSecondsPerGb(), base);
    }

    private String json(Perftest.LatencyRow r, Perftest.LatencyRow link) {
        String base = link == null ? "" : String.format(Locale.ROOT, ",\"grpc_t_typical_usec\":%.2f,\"grpc_p99_usec\":%.2f",
                link.typical(), link.p99());
        return String.format(Locale.ROOT, "{\"test\":\"%s\",\"mode\":\"%s\",\"bytes\":%d,\"iterations\":%d,\"t_min_usec\":%.2f,\"t_max_usec\":%.2f,"
                + "\"t_typical_usec\":%.2f,\"t_avg_usec\":%.2f,\"t_stdev_usec\":%.2f,\"p99_usec\":%.2f,\"p999_usec\":%.2f%s}", test, mode,
                r.bytes(), r.iterations(), r.min(), r.max(), r.typical(), r.average(), r.stdev(), r.p99(), r.p999(), base);
    }

    /** A progress bar on the terminal for long runs; silent when output is not a terminal. */
    static final class Progress {
        private final PrintWriter err;
        private final boolean terminal = System.console() != null;
        private long lastDrawNs;
        private boolean drawn;

        Progress(PrintWriter err) {
            this.err = err;
        }

        LongConsumer forSize(String test, int size, long total) {
            if (!terminal) {
                return done -> { };
            }
            long startNs = System.nanoTime();
            return done -> {
                long now = System.nanoTime();
                if (now - lastDrawNs < 200_000_000L || now - startNs < 500_000_000L) {
                    return;
                }
                lastDrawNs = now;
                drawn = true;
                int width = 30;
                int filled = total > 0 ? (int) Math.min(width, done * width / total) : (int) ((now - startNs) / 500_000_000L % (width + 1));
                String bar = "=".repeat(filled) + " ".repeat(width - filled);
                String share = total > 0 ? (done * 100 / total) + "%" : done + " done";
                err.printf("\r[%s] %s %s %d B ", bar, share, test, size);
                err.flush();
            };
        }

        void done() {
            if (drawn) {
                err.print("\r" + " ".repeat(70) + "\r");
                err.flush();
                drawn = false;
            }
        }
    }
}
