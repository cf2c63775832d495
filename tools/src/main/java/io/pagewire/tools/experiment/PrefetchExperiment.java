package io.pagewire.tools.experiment;

import io.pagewire.node.nic.NicCounter;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * {@code prefetch} (rdma-core's {@code ibv_advise_mr}; the first-use cost users report for ODP):
 * rdma-core's {@code ibv_rc_pingpong} run unmodified through the verbs library between two nodes, its
 * buffers registered on demand, explicitly ({@code -o}) or implicitly ({@code -O}: the whole address
 * space, a buffer mapped when first used), with and without {@code -P}, which prefetches the buffer
 * ({@code IBV_ADVISE_MR_ADVICE_PREFETCH}) before the first exchange. A run of one exchange times the
 * first iteration; a run of many, the steady state. Both nodes' meters count the NIC page faults (the
 * SEND's source and the receive buffer, on each side), the RNR NAKs they caused and the pages
 * prefetched. An explicit registration maps the pages already resident (mlx5's snapshot), and the
 * library's registration makes the buffer resident, so {@code -o} has no first-touch fault to remove.
 * It changes no node's settings, so it runs as well against two nodes of a running cluster on this
 * host, whose meters then count their other traffic too.
 */
public final class PrefetchExperiment implements Experiment {
    private static final String PINGPONG = "ibv_rc_pingpong";
    private static final Pattern ITERS = Pattern.compile("(\\d+) iters in ([\\d.]+) seconds = ([\\d.]+) usec/iter");
    private static final List<String> REGISTRATIONS = List.of("-o", "-O");

    /** How big a run is: exchanges in a steady-state run, and rounds of every case. */
    record Shape(int steadyIterations, int rounds) {
    }

    static final Shape DEFAULT = new Shape(1000, 9);
    static final Shape REDUCED = new Shape(200, 2);

    @Override
    public String name() {
        return "prefetch";
    }

    @Override
    public String paper() {
        return "rdma-core's ibv_advise_mr (PREFETCH, PREFETCH_WRITE, PREFETCH_NO_FAULT): prefetching an on-demand region's pages before"
                + " they are used removes the NIC page faults of their first use, which ODP users see as a slow first iteration.";
    }

    /** One pingpong configuration: its registration option, whether it prefetches, and how many exchanges. */
    record Case(String registration, boolean prefetch, int iterations) {
        List<String> options() {
            List<String> options = new ArrayList<>(List.of(registration, "-n", String.valueOf(iterations)));
            if (prefetch) {
                options.add("-P");
            }
            return options;
        }

        String label() {
            return registration + (prefetch ? " -P" : "") + " -n " + iterations;
        }
    }

    /** What one run measured: the client's usec/iter and what both nodes counted meanwhile. */
    record Sample(double usecPerIter, long faults, long rnrNaks, long prefetchedPages, long prefetchFaults) {
    }

    /** The median of a case's rounds: its time per exchange and counts. */
    record Row(Case c, Sample median) {
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        try (VerbsNodes nodes = VerbsNodes.open(settings, c -> c.nic().randomSeed(settings.seed()), PINGPONG, "ib_write_bw")) {
            progress.println("prefetch: " + nodes.where() + ", warming up ...");
            progress.flush();
            nodes.programs().writeBandwidthMbPerSec(nodes.requesterPlace(), nodes.responderPlace(), 65536, settings.reduced() ? 2 : 10);
            List<Case> cases = new ArrayList<>();
            for (String registration : REGISTRATIONS) {
                for (int iterations : new int[] {1, shape.steadyIterations()}) {
                    cases.add(new Case(registration, false, iterations));
                    cases.add(new Case(registration, true, iterations));
                }
            }
            Map<Case, List<Sample>> samples = new LinkedHashMap<>();
            for (int round = 0; round < shape.rounds(); round++) {
                for (Case c : cases) {
                    progress.printf(Locale.ROOT, "prefetch: ibv_rc_pingpong %s, round %d ...%n", c.label(), round + 1);
                    progress.flush();
                    samples.computeIfAbsent(c, k -> new ArrayList<>()).add(measure(nodes, c));
                }
            }
            List<Row> rows = new ArrayList<>();
            samples.forEach((c, s) -> rows.add(new Row(c, VerbsNodes.median(s, Sample::usecPerIter))));
            return result(rows, shape);
        }
    }

    private static Sample measure(VerbsNodes nodes, Case c) {
        List<NodeStats> before = List.of(nodes.requesterStats(), nodes.responderStats());
        String out = nodes.programs().pair(PINGPONG, nodes.requesterPlace(), nodes.responderPlace(), c.options(), Map.of(),
                output -> ITERS.matcher(output).find());
        if (out == null) {
            throw new IllegalStateException("ibv_rc_pingpong " + c.label() + " failed: " + nodes.programs().failure() + "\nmeters:\n"
                    + nodes.requesterStats().counted() + "\n" + nodes.responderStats().counted());
        }
        Matcher m = ITERS.matcher(out);
        m.find();
        long faults = 0;
        long rnr = 0;
        long prefetched = 0;
        long prefetchFaults = 0;
        List<NodeStats> after = List.of(nodes.requesterStats(), nodes.responderStats());
        for (int i = 0; i < 2; i++) {
            NodeStats was = before.get(i);
            NodeStats now = after.get(i);
            for (NicCounter fault : List.of(NicCounter.SEND_FAULTS_MINOR, NicCounter.SEND_FAULTS_MAJOR, NicCounter.RECEIVE_FAULTS_MINOR,
                    NicCounter.RECEIVE_FAULTS_MAJOR, NicCounter.RECEIVE_BUFFER_FAULTS_MINOR, NicCounter.RECEIVE_BUFFER_FAULTS_MAJOR)) {
                faults += now.since(was, fault);
            }
            rnr += now.since(was, NicCounter.RNR_NAKS_SENT);
            prefetched += now.since(was, NicCounter.PREFETCHED_PAGES);
            prefetchFaults += now.since(was, NicCounter.PREFETCH_FAULTS_MINOR) + now.since(was, NicCounter.PREFETCH_FAULTS_MAJOR);
        }
        return new Sample(Double.parseDouble(m.group(3)), faults, rnr, prefetched, prefetchFaults);
    }

    private static Row find(List<Row> rows, String registration, boolean prefetch, int iterations) {
        return rows.stream().filter(r -> r.c().registration().equals(registration) && r.c().prefetch() == prefetch
                && r.c().iterations() == iterations).findFirst().orElseThrow();
    }

    static ExperimentResult result(List<Row> rows, Shape shape) {
        List<List<Object>> table = new ArrayList<>();
        for (Row r : rows) {
            Sample s = r.median();
            table.add(List.of(r.c().registration().equals("-O") ? "implicit (-O)" : "explicit (-o)", r.c().prefetch() ? "yes (-P)" : "no",
                    r.c().iterations(), s.faults(), s.rnrNaks(), s.prefetchedPages(), s.prefetchFaults(), s.usecPerIter()));
        }
        List<String> categories = new ArrayList<>();
        double[] first = new double[4];
        double[] steady = new double[4];
        int i = 0;
        for (String registration : REGISTRATIONS) {
            for (boolean prefetch : new boolean[] {false, true}) {
                categories.add(registration + (prefetch ? " -P" : ""));
                first[i] = find(rows, registration, prefetch, 1).median().usecPerIter();
                steady[i] = find(rows, registration, prefetch, shape.steadyIterations()).median().usecPerIter();
                i++;
            }
        }
        Map<String, double[][]> series = new LinkedHashMap<>();
        series.put("first exchange (-n 1)", new double[][] {new double[4], first});
        series.put("steady (-n " + shape.steadyIterations() + ")", new double[][] {new double[4], steady});

        Row implicitCold = find(rows, "-O", false, 1);
        Row implicitPrefetched = find(rows, "-O", true, 1);
        List<Row> explicit = rows.stream().filter(r -> r.c().registration().equals("-o")).toList();
        List<Row> implicitRows = rows.stream().filter(r -> r.c().registration().equals("-O")).toList();
        List<Claim> claims = List.of(
                new Claim("prefetching an implicit on-demand registration removes its first-use NIC page faults",
                        implicitRows.stream().allMatch(r -> r.c().prefetch() ? r.median().faults() == 0 && r.median().rnrNaks() == 0
                                && r.median().prefetchedPages() > 0 : r.median().faults() > 0),
                        implicitRows.stream().map(r -> String.format(Locale.ROOT, "%s: %d faults, %d RNR NAKs, %d pages prefetched",
                                r.c().label(), r.median().faults(), r.median().rnrNaks(), r.median().prefetchedPages()))
                                .collect(Collectors.joining("; "))),
                new Claim("so the first exchange is faster with prefetch", implicitPrefetched.median().usecPerIter() < implicitCold.median().usecPerIter(),
                        String.format(Locale.ROOT, "-O -n 1: %.0f us, with -P %.0f us (%.1fx)", implicitCold.median().usecPerIter(),
                                implicitPrefetched.median().usecPerIter(), implicitCold.median().usecPerIter() / implicitPrefetched.median().usecPerIter())),
                new Claim("an explicit on-demand registration maps the pages resident when it is made (mlx5's snapshot), so it has no"
                        + " first-use fault for prefetch to remove", explicit.stream().allMatch(r -> r.median().faults() == 0),
                        explicit.stream().map(r -> String.format(Locale.ROOT, "%s: %d faults", r.c().label(), r.median().faults()))
                                .collect(Collectors.joining("; "))));
        return new ExperimentResult(List.of("registration", "prefetch", "exchanges", "NIC page faults", "RNR NAKs", "pages prefetched",
                "prefetch faults", "us per exchange"), table,
                new ExperimentResult.Plot("prefetch: ibv_rc_pingpong's time per exchange, first and steady", "registration and prefetch",
                        "us per exchange", false, series, categories),
                claims);
    }
}
