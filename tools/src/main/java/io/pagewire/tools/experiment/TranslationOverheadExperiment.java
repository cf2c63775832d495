package io.pagewire.tools.experiment;

import io.pagewire.client.RegistrationMode;
import io.pagewire.tools.perf.Perftest;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * {@code translation-overhead} (NetVM): what translating an application's virtual addresses costs a
 * small write once the translation is warm, per registration mode against static pinning. A 64-byte
 * write ping-pong between applications on two nodes (gRPC between the nodes, the SDK's shared-memory
 * rings between each application and its node), its pings taking turns between the modes, so that
 * the machine's drift falls on all of them alike; a further row writes each ping into a page never
 * touched before (PIN_ON_MISS: a minor fault and a pin on the receive path). It runs on two nodes
 * it starts, or against two nodes of a running cluster.
 */
public final class TranslationOverheadExperiment implements Experiment {
    private static final int SIZE = 64;
    /** NetVM's bound on the shadow page table's cost over static pinning. */
    private static final double NETVM_BOUND = 0.05;

    @Override
    public String name() {
        return "translation-overhead";
    }

    @Override
    public String paper() {
        return "NetVM (Huang, 2009) keeps a shadow page table on the NIC instead of pinning: with translations warm, a small write's "
                + "latency is within 5 % of static pinning's.";
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        long iterations = settings.reduced() ? 1_000 : 20_000;
        int warmup = settings.reduced() ? 500 : 5_000;
        List<Perftest.Variant> variants = new ArrayList<>();
        for (RegistrationMode mode : RegistrationMode.values()) {
            variants.add(new Perftest.Variant(mode, false));
        }
        variants.add(new Perftest.Variant(RegistrationMode.PIN_ON_MISS, true));
        progress.printf(Locale.ROOT, "translation-overhead: %d pings per row after %d to warm up, rows taking turns ...%n", iterations, warmup);
        progress.flush();
        List<Perftest.LatencyRow> rows;
        try (ApplicationPair pair = ApplicationPair.open(settings);
                Perftest perftest = new Perftest(pair.requester(), pair.responder(), RegistrationMode.PINNED, false)) {
            progress.printf(Locale.ROOT, "translation-overhead: %s%n", pair.where());
            progress.flush();
            rows = perftest.interleavedWriteLatency(variants, SIZE, iterations, warmup);
        }
        return result(variants, rows);
    }

    private static ExperimentResult result(List<Perftest.Variant> variants, List<Perftest.LatencyRow> rows) {
        double pinned = roundTrip(rows.get(variants.indexOf(new Perftest.Variant(RegistrationMode.PINNED, false))));
        List<List<Object>> table = new ArrayList<>();
        double[] added = new double[variants.size()];
        List<String> labels = new ArrayList<>();
        for (int i = 0; i < variants.size(); i++) {
            Perftest.LatencyRow row = rows.get(i);
            double rtt = roundTrip(row);
            table.add(List.of(variants.get(i).toString(), rtt, 2 * row.p99(), rtt - pinned, 100 * (rtt / pinned - 1)));
            added[i] = rtt - pinned;
            labels.add(variants.get(i).freshPages() ? variants.get(i).mode() + ", fresh page" : variants.get(i).mode().name());
        }
        Map<String, double[][]> series = new LinkedHashMap<>();
        series.put("added round trip over PINNED (us)", new double[][] {new double[added.length], added});

        List<Claim> claims = new ArrayList<>();
        double shadow = overhead(variants, rows, RegistrationMode.SHADOW, pinned);
        claims.add(new Claim("a warm shadow page table (SHADOW) adds less than 5 % to a small write's latency over static pinning",
                shadow < NETVM_BOUND, String.format(Locale.ROOT, "%+.1f %% (round trip p50 %.1f us against %.1f us)", 100 * shadow,
                        pinned * (1 + shadow), pinned)));
        double worst = Double.NEGATIVE_INFINITY;
        RegistrationMode worstMode = null;
        for (RegistrationMode mode : RegistrationMode.values()) {
            double o = overhead(variants, rows, mode, pinned);
            if (mode != RegistrationMode.PINNED && o > worst) {
                worst = o;
                worstMode = mode;
            }
        }
        claims.add(new Claim("every mode's warm translation (a TLB hit, a shadow entry) stays within 5 % of static pinning", worst < NETVM_BOUND,
                String.format(Locale.ROOT, "largest %+.1f %% (%s)", 100 * worst, worstMode)));
        return new ExperimentResult(List.of("row", "round trip p50 us", "round trip p99 us", "added us", "added %"), table,
                new ExperimentResult.Plot("translation-overhead: what a 64 B write's round trip adds over PINNED (p50)", "registration mode",
                        "added round trip (us)", false, series, labels),
                claims);
    }

    private static double overhead(List<Perftest.Variant> variants, List<Perftest.LatencyRow> rows, RegistrationMode mode, double pinned) {
        return roundTrip(rows.get(variants.indexOf(new Perftest.Variant(mode, false)))) / pinned - 1;
    }

    /** The round trip's median: perftest reports half of it. */
    private static double roundTrip(Perftest.LatencyRow row) {
        return 2 * row.typical();
    }
}
