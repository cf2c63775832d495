package io.pagewire.tools.perf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.style.Styler;

/**
 * What {@code pagewire bench} writes: every figure's median and range over the rounds, then the ratios
 * the data path is held to (each against a baseline measured in the same rounds, round by round),
 * with their targets, as a markdown table, a CSV of the raw rounds, and a PNG plot of the ratios.
 */
public final class BenchReport {
    /** A ratio with its target: {@code numerator / denominator} (or their difference) per round, median taken. */
    record Ratio(String name, String numerator, String denominator, Kind kind, double target) {
        /** How the two figures combine and which way the target points. */
        enum Kind {
            /** numerator / denominator must be at least the target. */
            AT_LEAST,
            /** numerator / denominator must be at most the target. */
            AT_MOST,
            /** numerator / denominator - 1 must be at most the target (an overhead). */
            OVERHEAD_AT_MOST,
            /** numerator - denominator must be at most the target (an added time). */
            ADDED_AT_MOST,
            /** numerator alone must be at most the target (microseconds); the denominator is shown beside it. */
            VALUE_AT_MOST,
            /** numerator / denominator, shown to tell costs apart, held to no target. */
            SHOWN
        }
    }

    /** The ratios issue 8 holds the data path to, each named by the figures it is made of. */
    static List<Ratio> ratios() {
        List<Ratio> ratios = new ArrayList<>();
        for (int size : Bench.BANDWIDTH_SIZES) {
            String kib = Bench.label(size);
            for (String mode : new String[] {"PINNED", "ON_DEMAND"}) {
                ratios.add(new Ratio("write_bw " + kib + " " + mode + " / grpc stream", "write_bw " + kib + " " + mode + " MB/s",
                        "grpc stream " + kib + " MB/s", Ratio.Kind.AT_LEAST, 0.9));
                ratios.add(new Ratio("CPU per GB " + kib + " " + mode + " / grpc stream", "write_bw " + kib + " " + mode + " CPU s/GB",
                        "grpc stream " + kib + " CPU s/GB", Ratio.Kind.AT_MOST, 1.5));
            }
        }
        ratios.add(new Ratio("write_bw 4 KiB PINNED, link-window depth / grpc stream", "write_bw 4 KiB PINNED, link-window depth MB/s",
                "grpc stream 4 KiB MB/s", Ratio.Kind.AT_LEAST, 0.9));
        ratios.add(new Ratio("write RTT p50 default / grpc ping-pong", "write RTT 64 B default p50 us",
                "grpc ping-pong RTT 64 B default p50 us", Ratio.Kind.AT_MOST, 1.5));
        ratios.add(new Ratio("write RTT p50 busy-poll / ucx put_lat", "write RTT 64 B busy-poll p50 us",
                "ucx ucp_put_lat RTT 64 B p50 us", Ratio.Kind.AT_MOST, 3));
        ratios.add(new Ratio("write RTT p50 busy-poll, watching memory / grpc ping-pong busy-poll", "write RTT 64 B busy-poll p50 us",
                "grpc ping-pong RTT 64 B busy-poll p50 us", Ratio.Kind.AT_MOST, 1.3));
        ratios.add(new Ratio("store+load 64 B co-located p50, us (gRPC calls beside it)", "store+load 64 B co-located p50 us",
                "store+load 64 B gRPC calls p50 us", Ratio.Kind.VALUE_AT_MOST, 1));
        ratios.add(new Ratio("store+load 64 B gRPC calls / co-located", "store+load 64 B gRPC calls p50 us",
                "store+load 64 B co-located p50 us", Ratio.Kind.SHOWN, 0));
        ratios.add(new Ratio("store 1 MiB co-located / plain copy", "store 1 MiB co-located MB/s", "plain copy 1 MiB MB/s",
                Ratio.Kind.AT_LEAST, 0.5));
        ratios.add(new Ratio("write RTT p99 / p50, busy-poll", "write RTT 64 B busy-poll p99 us", "write RTT 64 B busy-poll p50 us",
                Ratio.Kind.AT_MOST, 3));
        ratios.add(new Ratio("write RTT p99 / p50, default", "write RTT 64 B default p99 us", "write RTT 64 B default p50 us",
                Ratio.Kind.AT_MOST, 3));
        for (String mode : new String[] {"PIN_ON_MISS", "SHADOW", "ON_DEMAND"}) {
            ratios.add(new Ratio("warm translation overhead " + mode + " vs PINNED", "write RTT 64 B warm " + mode + " p50 us",
                    "write RTT 64 B warm PINNED p50 us", Ratio.Kind.OVERHEAD_AT_MOST, 0.05));
        }
        ratios.add(new Ratio("minor receive fault, added us", "write RTT 64 B PIN_ON_MISS, minor receive fault each ping p50 us",
                "write RTT 64 B warm PIN_ON_MISS p50 us", Ratio.Kind.ADDED_AT_MOST, 10));
        for (int size : Bench.BANDWIDTH_SIZES) {
            String kib = Bench.label(size);
            ratios.add(new Ratio("verbs ib_write_bw " + kib + " / grpc stream", "verbs ib_write_bw " + kib + " MB/s", "grpc stream " + kib + " MB/s",
                    Ratio.Kind.AT_LEAST, 0.9));
        }
        ratios.add(new Ratio("verbs ib_write_lat RTT p50 busy-poll / perf write_lat busy-poll", "verbs ib_write_lat RTT 64 B busy-poll p50 us",
                "write RTT 64 B busy-poll p50 us", Ratio.Kind.AT_MOST, 1.2));
        ratios.addAll(middlewareRatios());
        ratios.addAll(securedRatios());
        return ratios;
    }

    /** Issue 54's: the programs HPC and AI software runs, against the link, each other, and the same over TCP. */
    static List<Ratio> middlewareRatios() {
        String grpc = "grpc ping-pong RTT 64 B default p50 us";
        String sendLat = "verbs ib_send_lat RTT 64 B default p50 us";
        String large = Bench.label(Bench.MPI_LARGE_SIZE);
        List<Ratio> ratios = new ArrayList<>();
        for (String program : new String[] {"ib_send_lat", "ib_write_lat"}) {
            String p50 = "verbs " + program + " RTT 64 B default p50 us";
            ratios.add(new Ratio("verbs " + program + " p50 / grpc ping-pong", p50, grpc, Ratio.Kind.AT_MOST, 1.5));
            ratios.add(new Ratio("verbs " + program + " p99 / p50", "verbs " + program + " RTT 64 B default p99 us", p50, Ratio.Kind.AT_MOST, 5));
        }
        ratios.add(new Ratio("ucx tag_lat rc_v / verbs ib_send_lat", "ucx tag_lat rc_v RTT 8 B p50 us", sendLat, Ratio.Kind.AT_MOST, 1.5));
        ratios.add(new Ratio("ucx tag_lat ud_v / verbs ib_send_lat", "ucx tag_lat ud_v RTT 8 B p50 us", sendLat, Ratio.Kind.AT_MOST, 2));
        ratios.add(new Ratio("mpi 8 B pml ucx / ucx tag_lat ud_v", "mpi pml ucx ud_v RTT 8 B us", "ucx tag_lat ud_v RTT 8 B p50 us",
                Ratio.Kind.AT_MOST, 1.3));
        ratios.add(new Ratio("ucx tag_lat rc_v / ucx over tcp", "ucx tag_lat rc_v RTT 8 B p50 us", "ucx tag_lat tcp RTT 8 B p50 us",
                Ratio.Kind.AT_MOST, 5));
        ratios.add(new Ratio("mpi 8 B pml ucx / mpi over tcp", "mpi pml ucx ud_v RTT 8 B us", "mpi tcp RTT 8 B us", Ratio.Kind.AT_MOST, 5));
        String writeBw = "verbs ib_write_bw " + Bench.label(Bench.VERBS_BANDWIDTH_SIZE) + " MB/s";
        ratios.add(new Ratio("verbs ib_write_bw " + Bench.RATE_SIZE + " B message rate (post lists of " + Bench.POST_LIST
                + ") / grpc stream", "verbs ib_write_bw " + Bench.RATE_SIZE + " B Mpps", "grpc stream " + Bench.RATE_SIZE + " B Mpps",
                Ratio.Kind.AT_LEAST, 0.5));
        ratios.add(new Ratio("verbs ib_send_bw / ib_write_bw " + Bench.label(Bench.VERBS_BANDWIDTH_SIZE),
                "verbs ib_send_bw " + Bench.label(Bench.VERBS_BANDWIDTH_SIZE) + " MB/s", writeBw, Ratio.Kind.AT_LEAST, 0.9));
        ratios.add(new Ratio("ucx tag_bw rc_v " + Bench.label(Bench.VERBS_BANDWIDTH_SIZE) + " / verbs ib_write_bw",
                "ucx tag_bw rc_v " + Bench.label(Bench.VERBS_BANDWIDTH_SIZE) + " MB/s", writeBw, Ratio.Kind.AT_LEAST, 0.8));
        ratios.add(new Ratio("ucx tag_bw rc_v / ucx over tcp " + Bench.label(Bench.VERBS_BANDWIDTH_SIZE),
                "ucx tag_bw rc_v " + Bench.label(Bench.VERBS_BANDWIDTH_SIZE) + " MB/s", "ucx tag_bw tcp " + Bench.label(Bench.VERBS_BANDWIDTH_SIZE)
                        + " MB/s", Ratio.Kind.SHOWN, 0));
        ratios.add(new Ratio("mpi " + large + " pml ucx / mpi over tcp", "mpi pml ucx ud_v " + large + " MB/s", "mpi tcp " + large + " MB/s",
                Ratio.Kind.AT_LEAST, 0.5));
        return ratios;
    }

    /**
     * The configurations users run: host processes with mutual TLS against the plaintext ones (what
     * security costs), each against its own link (what Pagewire adds on it), and the testbed's nodes
     * against the host processes with the same security (what containers cost).
     */
    static List<Ratio> securedRatios() {
        String p = Bench.PLAIN;
        String m = Bench.MTLS;
        String t = Bench.TESTBED;
        List<Ratio> ratios = new ArrayList<>();
        for (int size : Bench.BANDWIDTH_SIZES) {
            String kib = Bench.label(size);
            ratios.add(new Ratio(m + " write_bw " + kib + " PINNED / plaintext", m + " write_bw " + kib + " PINNED MB/s",
                    p + " write_bw " + kib + " PINNED MB/s", Ratio.Kind.AT_LEAST, 0.8));
            ratios.add(new Ratio(m + " write_bw " + kib + " PINNED / " + m + " grpc stream", m + " write_bw " + kib + " PINNED MB/s",
                    m + " grpc stream " + kib + " MB/s", Ratio.Kind.AT_LEAST, 0.9));
            ratios.add(new Ratio(m + " grpc stream " + kib + " / plaintext", m + " grpc stream " + kib + " MB/s", p + " grpc stream " + kib + " MB/s",
                    Ratio.Kind.SHOWN, 0));
        }
        ratios.add(new Ratio(m + " write RTT p50 / plaintext", m + " write RTT 64 B p50 us", p + " write RTT 64 B p50 us",
                Ratio.Kind.AT_MOST, 1.2));
        ratios.add(new Ratio(m + " write RTT p50 / " + m + " grpc ping-pong", m + " write RTT 64 B p50 us", m + " grpc ping-pong RTT 64 B p50 us",
                Ratio.Kind.AT_MOST, 1.5));
        ratios.add(new Ratio(m + " grpc ping-pong / plaintext", m + " grpc ping-pong RTT 64 B p50 us", p + " grpc ping-pong RTT 64 B p50 us",
                Ratio.Kind.SHOWN, 0));
        ratios.add(new Ratio("ring hop " + m + " / plaintext", "ring hop 8 KiB " + m + " us", "ring hop 8 KiB " + p + " us", Ratio.Kind.SHOWN, 0));
        for (int size : Bench.BANDWIDTH_SIZES) {
            String kib = Bench.label(size);
            ratios.add(new Ratio(t + " write_bw " + kib + " PINNED / " + m + " host", t + " write_bw " + kib + " PINNED MB/s",
                    m + " write_bw " + kib + " PINNED MB/s", Ratio.Kind.AT_LEAST, 0.7));
            ratios.add(new Ratio(t + " grpc stream " + kib + " (node to node) / " + m + " host", t + " grpc stream " + kib + " MB/s",
                    m + " grpc stream " + kib + " MB/s", Ratio.Kind.AT_LEAST, 0.7));
        }
        ratios.add(new Ratio(t + " write_bw 64 KiB PINNED / " + m + " host, remote application", t + " write_bw 64 KiB PINNED MB/s",
                m + " write_bw 64 KiB PINNED, remote application MB/s", Ratio.Kind.SHOWN, 0));
        ratios.add(new Ratio(t + " write RTT p50 / " + m + " host", t + " write RTT 64 B p50 us", m + " write RTT 64 B p50 us",
                Ratio.Kind.AT_MOST, 1.5));
        ratios.add(new Ratio(t + " write RTT p50 / " + m + " host, remote application", t + " write RTT 64 B p50 us",
                m + " write RTT 64 B, remote application p50 us", Ratio.Kind.SHOWN, 0));
        ratios.add(new Ratio(t + " grpc ping-pong (node to node) / " + m + " host", t + " grpc ping-pong RTT 64 B p50 us",
                m + " grpc ping-pong RTT 64 B p50 us", Ratio.Kind.AT_MOST, 1.5));
        ratios.add(new Ratio("ring hop " + t + " / " + m + " host", "ring hop 8 KiB " + t + " us", "ring hop 8 KiB " + m + " us",
                Ratio.Kind.AT_MOST, 2));
        ratios.add(new Ratio("ring hop " + t + " / " + m + " host, remote application", "ring hop 8 KiB " + t + " us",
                "ring hop 8 KiB " + m + ", remote application us", Ratio.Kind.SHOWN, 0));
        // Unmodified verbs programs inside two node containers, against the same between two host node processes.
        ratios.add(new Ratio(t + " verbs ib_write_bw 64 KiB / " + m + " host", t + " verbs ib_write_bw 64 KiB MB/s",
                m + " verbs ib_write_bw 64 KiB MB/s", Ratio.Kind.AT_LEAST, 0.7));
        ratios.add(new Ratio(t + " verbs ib_write_lat RTT p50 / " + m + " host", t + " verbs ib_write_lat RTT 64 B p50 us",
                m + " verbs ib_write_lat RTT 64 B p50 us", Ratio.Kind.AT_MOST, 1.5));
        ratios.add(new Ratio(t + " verbs ib_write_lat RTT p99 / p50", t + " verbs ib_write_lat RTT 64 B p99 us",
                t + " verbs ib_write_lat RTT 64 B p50 us", Ratio.Kind.AT_MOST, 5));
        ratios.add(new Ratio(m + " verbs ib_write_lat RTT p99 / p50", m + " verbs ib_write_lat RTT 64 B p99 us",
                m + " verbs ib_write_lat RTT 64 B p50 us", Ratio.Kind.SHOWN, 0));
        return ratios;
    }

    private final Map<String, List<Double>> figures;
    private final String header;
    private final HopRun.Found breakdown;

    public BenchReport(Map<String, List<Double>> figures, String header) {
        this(figures, header, null);
    }

    /** @param breakdown where one message's time went in the same run, or null when it was not measured */
    public BenchReport(Map<String, List<Double>> figures, String header, HopRun.Found breakdown) {
        this.figures = figures;
        this.header = header;
        this.breakdown = breakdown;
    }

    /** What the benchmark page says before the latest run's tables: what is measured, and how. */
    private static final String METHOD = """
            # Benchmarks

            <!-- Written by `pagewire bench --out docs/bench --page docs/benchmarks.md` from its latest run; do not edit. -->

            What Pagewire measures must not drown in what the emulator costs, so `pagewire bench` measures the data path
            against the link it runs on, in the same run, and judges ratios taken round by round rather than absolute
            figures, which drift on a shared machine:

            - two pairs of node processes on loopback (default, and latency mode), 20 s of traffic through each, then an
              unrecorded round 0 over every path, so that no measured round sees the JIT compilers at work;
            - per round, interleaved with its baseline: `write_bw` at 4 KiB, 64 KiB and 1 MiB (PINNED and warm ON_DEMAND)
              with CPU per GB, against the raw gRPC stream between the same processes; 4 KiB with as many bytes in
              flight as the lanes' flow-control window; a remote application (the gRPC verbs path);
            - 64 B write and read round trips, default and busy-polling (write_lat watching memory, as ib_write_lat
              does), against a plain gRPC ping-pong and UCX's `ucp_put_lat` over TCP where `ucx_perftest` is installed;
              an embedded pair;
            - an application's own memory on the node's host: a 64 B store and load against the same as gRPC calls, and
              1 MiB stores against a plain copy of 1 MiB into off-heap memory in the same process;
            - each mode's warm translation against PINNED, and a minor receive fault, in one ping-pong whose pings take
              turns between the modes, so that differences of a few microseconds are measured in the same moments.

            The configurations users run are measured beside these, size by size in the same rounds, each against its own
            link (the raw gRPC stream and ping-pong between the same two nodes, over the same security and network path),
            so that what Pagewire adds and what the path costs are told apart:

            - **plaintext**: the default pair again, next in time to the others;
            - **mTLS**: two node processes with mutual TLS (certificates made for the run), the default of every
              testbed; also as a remote application (no rings), the way an application reaches nodes it cannot share
              memory with;
            - **testbed**: two nodes of a running testbed given with `--testbed` (`deploy/testbed.sh bench` gives the
              compose testbed's node-1 and node-2, reached from the host with the testbed's certificates, and starts
              the host processes with the compose nodes' memory settings), against the mTLS host processes; its
              node-to-node lanes cross the compose network;
            - the ring example (`NotifyRing`, 8 KiB, two members) on each: its median time per hop.

            The middleware HPC and AI software sits on runs unmodified between the default pair's nodes, per round,
            beside the same programs over TCP loopback on the same cores: perftest's `ib_send_lat` and `ib_write_lat`
            (64 B) through the verbs library; UCX's `ucx_perftest -t tag_lat` (8 B) over `rc_v`, `ud_v` and `tcp`
            (registration PIN_ON_MISS); OpenMPI's ping-pong (`pagewire-mpi-check`) at 8 B and 256 KiB over `pml ucx`
            (`ud_v`, registration PINNED) and over `pml ob1` with `btl tcp`. Their round trips are twice the one-way
            figures they print. Beside them, their throughput: `ib_write_bw` at every bandwidth size against the raw
            gRPC stream, its message rate at 64 B (post lists of 16, perftest's `-l`) against the rate at which the raw
            stream carries 64-byte messages, `ib_send_bw` at 64 KiB against `ib_write_bw`, and `ucx_perftest -t tag_bw`
            at 64 KiB over `rc_v` against `ib_write_bw` (and over `tcp`, shown).

            A ratio without a target is shown to tell costs apart (for example what TLS costs the raw gRPC stream itself).

            Bandwidth runs as perftest's `ib_write_bw` does: 128 requests in flight, posted in lists of 16, one in 100
            signalled, each signalled completion's callback posting what it retired again. Each round-trip figure is taken
            after warm-up batches that go on until the JIT compilers did nothing during one. The run also writes, into its
            `--out` directory, `bench.csv` (every round), `bench.png` (each ratio against its target, below),
            `bench-round-trips.csv` (every round trip behind the round-trip figures) and the node processes' logs.

            Last, on a pair of its own, one 8-byte SEND is followed hop by hop (`pagewire hops`): where a message's
            microseconds go between a program's post and its peer's poll.

            """;

    /** The benchmark page: what is measured, then this run's tables and its plot ({@code png}, relative to the page). */
    public String page(String png) {
        return METHOD + tables().replaceFirst("^## ", "## Latest run: ") + "\n![each ratio against its target](" + png + ")\n" + breakdownSection();
    }

    /** The markdown: the figures, the ratios with their targets, then where one message's time went. */
    public String markdown() {
        return tables() + breakdownSection();
    }

    private String breakdownSection() {
        return breakdown == null ? "" : "\n" + breakdown.markdown();
    }

    private String tables() {
        StringBuilder out = new StringBuilder(header).append("\n\n");
        out.append("| figure | median | range | rounds |\n|---|---:|---:|---:|\n");
        figures.forEach((name, values) -> out.append(String.format(Locale.ROOT, "| %s | %.2f | %.2f – %.2f | %d |%n", name,
                median(values), min(values), max(values), values.size())));
        out.append("\n| ratio | median | range | target | met |\n|---|---:|---:|---:|:---:|\n");
        for (Ratio ratio : ratios()) {
            List<Double> values = perRound(ratio);
            if (values.isEmpty()) {
                out.append(String.format(Locale.ROOT, "| %s | – | – | %s | not measured (%s) |%n", ratio.name(), target(ratio),
                        figures.containsKey(ratio.numerator()) ? ratio.denominator() : ratio.numerator()));
                continue;
            }
            double m = median(values);
            out.append(String.format(Locale.ROOT, "| %s | %s | %s – %s | %s | %s |%n", ratio.name(), format(ratio, m),
                    format(ratio, min(values)), format(ratio, max(values)), target(ratio), ratio.kind() == Ratio.Kind.SHOWN ? "–" : met(ratio, m) ? "yes" : "**no**"));
        }
        return out.toString();
    }

    /** The raw rounds: one line per figure and round. */
    public String csv() {
        StringBuilder out = new StringBuilder("figure,round,value\n");
        figures.forEach((name, values) -> {
            for (int i = 0; i < values.size(); i++) {
                out.append('"').append(name).append("\",").append(i + 1).append(',').append(values.get(i)).append('\n');
            }
        });
        return out.toString();
    }

    /** A bar chart of each measured ratio as a share of its target (1.0 = exactly on target; bars past 1 miss it). */
    public void plot(Path png) throws IOException {
        System.setProperty("java.awt.headless", "true");
        List<String> names = new ArrayList<>();
        List<Double> shares = new ArrayList<>();
        for (Ratio ratio : ratios()) {
            List<Double> values = perRound(ratio);
            if (values.isEmpty() || ratio.kind() == Ratio.Kind.SHOWN) {
                continue;
            }
            double m = median(values);
            // Distance from the target in the direction that counts, so that < 1 is met for every kind.
            double share = switch (ratio.kind()) {
                case AT_LEAST -> m <= 0 ? 10 : ratio.target() / m;
                case AT_MOST, OVERHEAD_AT_MOST, ADDED_AT_MOST, VALUE_AT_MOST -> ratio.target() == 0 ? 0 : Math.max(0, m) / ratio.target();
                case SHOWN -> 0;
            };
            names.add(ratio.name());
            shares.add(Math.min(share, 10));
        }
        CategoryChart chart = new CategoryChartBuilder().width(1400).height(700).title("pagewire bench: each ratio against its target")
                .xAxisTitle("ratio").yAxisTitle("measured / target (below 1 meets it)").build();
        chart.getStyler().setLegendVisible(true);
        chart.getStyler().setXAxisLabelRotation(60);
        chart.getStyler().setChartTitleVisible(true);
        chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNE);
        if (names.isEmpty()) {
            names.add("nothing measured");
            shares.add(0.0);
        }
        chart.addSeries("measured / target", names, shares);
        chart.addSeries("target", names, Collections.nCopies(names.size(), 1.0))
                .setChartCategorySeriesRenderStyle(org.knowm.xchart.CategorySeries.CategorySeriesRenderStyle.Line);
        chart.getStyler().setOverlapped(true);
        Files.createDirectories(png.toAbsolutePath().getParent());
        BitmapEncoder.saveBitmap(chart, png.toString(), BitmapEncoder.BitmapFormat.PNG);
    }

    /** The ratio in each round in which both of its figures were measured. */
    List<Double> perRound(Ratio ratio) {
        List<Double> a = figures.get(ratio.numerator());
        List<Double> b = figures.get(ratio.denominator());
        List<Double> out = new ArrayList<>();
        if (a == null || b == null) {
            return out;
        }
        for (int i = 0; i < Math.min(a.size(), b.size()); i++) {
            out.add(switch (ratio.kind()) {
                case AT_LEAST, AT_MOST, SHOWN -> a.get(i) / b.get(i);
                case OVERHEAD_AT_MOST -> a.get(i) / b.get(i) - 1;
                case ADDED_AT_MOST -> a.get(i) - b.get(i);
                case VALUE_AT_MOST -> a.get(i);
            });
        }
        return out;
    }

    static boolean met(Ratio ratio, double value) {
        return switch (ratio.kind()) {
            case AT_LEAST -> value >= ratio.target();
            case AT_MOST, OVERHEAD_AT_MOST, ADDED_AT_MOST, VALUE_AT_MOST -> value <= ratio.target();
            case SHOWN -> true;
        };
    }

    private static String format(Ratio ratio, double value) {
        return switch (ratio.kind()) {
            case AT_LEAST, AT_MOST, SHOWN -> String.format(Locale.ROOT, "%.2fx", value);
            case OVERHEAD_AT_MOST -> String.format(Locale.ROOT, "%+.1f%%", value * 100);
            case ADDED_AT_MOST -> String.format(Locale.ROOT, "%+.1f us", value);
            case VALUE_AT_MOST -> String.format(Locale.ROOT, "%.3f us", value);
        };
    }

    private static String target(Ratio ratio) {
        return switch (ratio.kind()) {
            case AT_LEAST -> String.format(Locale.ROOT, "≥ %.2fx", ratio.target());
            case AT_MOST -> String.format(Locale.ROOT, "≤ %.2fx", ratio.target());
            case OVERHEAD_AT_MOST -> String.format(Locale.ROOT, "≤ %.0f%%", ratio.target() * 100);
            case ADDED_AT_MOST -> String.format(Locale.ROOT, "≤ %.0f us", ratio.target());
            case VALUE_AT_MOST -> String.format(Locale.ROOT, "≤ %.1f us", ratio.target());
            case SHOWN -> "–";
        };
    }

    static double median(List<Double> values) {
        List<Double> sorted = new ArrayList<>(values);
        sorted.sort(Double::compare);
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    private static double min(List<Double> values) {
        return values.stream().mapToDouble(Double::doubleValue).min().orElse(Double.NaN);
    }

    private static double max(List<Double> values) {
        return values.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN);
    }
}
