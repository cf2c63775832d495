package io.pagewire.tools.experiment;

import io.pagewire.config.Meter;
import io.pagewire.kernel.FaultKind;
import io.pagewire.node.metrics.Metric;
import io.pagewire.node.nic.MemoryPressure;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.tools.perf.VerbsPerftest;
import java.io.PrintWriter;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;
import java.util.stream.Collectors;

/**
 * {@code fault-cost} (NP-RDMA, 2023, on ConnectX NICs): what one page fault adds to a small RDMA
 * operation, by the mechanism that serves it. Debian's {@code ib_write_lat} and {@code ib_read_lat}
 * run unmodified through the verbs library between two nodes, 64-byte operations, every buffer
 * registered in one mode ({@code PAGEWIRE_VERBS_REGISTRATION}). On the responder's node an injected
 * memory pressure takes the page a peer's request just touched away from the NIC in a set share of
 * the iterations ({@code pagewire.nic.reclaimAfterAccess}): MINOR takes its translation (TLB entry and
 * pin, on-demand mapping), the page staying in memory; MAJOR pages it out to the modelled swap device.
 * The next iteration then meets the fault: PIN_ON_MISS pins the page while the request waits (in
 * place), ON_DEMAND answers RNR NAK and the requester comes back after the responder's RNR timer
 * (perftest's {@code min_rnr_timer}), SHADOW's table follows the kernel's, so a page in memory needs
 * nothing. Every touch is followed by a take, so each iteration meets a fault and perftest's typical
 * (median) latency, which the machine's scheduling tail does not move, carries it. Each round runs a
 * mode's cases back to back, without the pressure first; what a fault adds is the median over rounds
 * of each run's typical round trip less that of the run without pressure in its round (ib_write_lat
 * reports half a round trip), and the responder's meters show how many iterations met one. Against
 * a running cluster the pressure is what the responding node was started with, on
 * throughout: PINNED, whose pages it never takes, is then each program's reference.
 */
public final class FaultCostExperiment implements Experiment {
    private static final int SIZE = 64;
    private static final String WRITE_LAT = "ib_write_lat";
    private static final String READ_LAT = "ib_read_lat";
    /** The node's meters that explain a fault's cost: the kernel's service of it, and an ON_DEMAND requester's RNR back-off. */
    private static final Meter FAULT_SERVICE = Metric.FAULT_SERVICE_TIME.meter();
    private static final Meter NIC_WAIT = Metric.NIC_WAIT_TIME.meter();
    /** The responder's configured pressure, by depth: what a running cluster's nodes were started with. */
    private static final String PRESSURE = Metric.MEMORY_PRESSURE.meter().prometheusName();
    private static final RegistrationMode[] MODES = {RegistrationMode.PINNED, RegistrationMode.PIN_ON_MISS, RegistrationMode.SHADOW,
        RegistrationMode.ON_DEMAND};

    /**
     * How big a run is: iterations per program run, the share of them whose page is taken, rounds per
     * mode, and seconds of ib_write_bw first, which brings the nodes' JIT-compiled paths up to speed.
     */
    record Shape(int iterations, double fraction, int rounds, int warmupSeconds) {
    }

    static final Shape DEFAULT = new Shape(2000, 1.0, 5, 10);
    static final Shape REDUCED = new Shape(300, 1.0, 1, 2);

    @Override
    public String name() {
        return "fault-cost";
    }

    @Override
    public String paper() {
        return "NP-RDMA (Shen et al., 2023), on ConnectX NICs: a minor page fault adds 3.5-5.7 us and a major one about 60 us when the fault"
                + " is served without the network's retry path; through ODP's RNR NAK and retry it is two or more orders of magnitude dearer.";
    }

    /** One program, mode and pressure (null: none). */
    record Case(String program, RegistrationMode mode, FaultKind taken) {
        String label() {
            return program + " " + mode + " " + (taken == null ? "none" : taken.name().toLowerCase(Locale.ROOT));
        }

        /** ib_write_lat reports half a round trip, and only the responder's half of each round trip meets the pressure. */
        int roundTripsPerReport() {
            return program.equals(WRITE_LAT) ? 2 : 1;
        }
    }

    /** What one run measured: perftest's row and what the responder's node counted meanwhile. */
    record Sample(VerbsPerftest.LatencyRow row, long taken, long tlbMisses, long minorFaults, long majorFaults, long rnrNaks,
            double faultServiceUs, double rnrBackoffUs) {
    }

    /** The median sample of a case's rounds and the latency a fault adds against its mode's pressure-free runs. */
    record Row(Case c, Sample median, double addedPerFaultUs) {
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        try (VerbsNodes nodes = VerbsNodes.open(settings, c -> c.nic().randomSeed(settings.seed()), WRITE_LAT, READ_LAT, "ib_write_bw")) {
            NodeStats responder = nodes.responderStats();
            long swapReadNs = Math.round(responder.sum(Metric.SWAP_READ_LATENCY.meter().prometheusName()) * 1e9);
            List<List<Case>> groups;
            if (nodes.embedded()) {
                groups = new ArrayList<>();
                for (String program : List.of(WRITE_LAT, READ_LAT)) {
                    for (RegistrationMode mode : MODES) {
                        groups.add(cases(program, mode));
                    }
                }
            } else {
                FaultKind depth = clusterDepth(nodes, responder);
                shape = new Shape(shape.iterations(), responder.sum(PRESSURE, "depth=" + depth.name().toLowerCase(Locale.ROOT)),
                        shape.rounds(), shape.warmupSeconds());
                groups = clusterCases(depth);
            }
            progress.printf(Locale.ROOT, "fault-cost: %s, ib_write_lat and ib_read_lat, %d iterations of %d bytes, a page taken after %.0f %%"
                    + " of touches, %d round(s) ...%n", nodes.where(), shape.iterations(), SIZE, 100 * shape.fraction(), shape.rounds());
            progress.flush();
            warmUp(nodes, shape, groups, progress);
            List<Row> rows = new ArrayList<>();
            for (List<Case> group : groups) {
                rows.addAll(measureCases(nodes, group, shape, progress));
            }
            return result(shape, swapReadNs, rows);
        }
    }

    /**
     * The depth a running cluster's responding node takes pages to ({@code pagewire.nic.reclaimDepth},
     * read from {@code pagewire_nic_memory_pressure}).
     *
     * @throws IllegalArgumentException when the node takes no pages, saying how to start it so that it does
     */
    private static FaultKind clusterDepth(VerbsNodes nodes, NodeStats responder) {
        for (FaultKind depth : FaultKind.values()) {
            if (responder.sum(PRESSURE, "depth=" + depth.name().toLowerCase(Locale.ROOT)) > 0) {
                return depth;
            }
        }
        throw new IllegalArgumentException("fault-cost: " + nodes.responderId() + " takes no pages from its NIC"
                + " (pagewire.nic.reclaimAfterAccess=0): start the cluster's responding node with --set pagewire.nic.reclaimAfterAccess=1"
                + " (and --set pagewire.nic.reclaimDepth=MAJOR for major faults) to run this experiment against it");
    }

    /**
     * The cases against a running cluster, whose pressure is on throughout: per program, PINNED first,
     * its reference (a registration's pinned pages are never taken), then the modes that meet the
     * pressure at the cluster's depth (MAJOR only under ib_read_lat, as {@link #cases} says why).
     */
    private static List<List<Case>> clusterCases(FaultKind depth) {
        List<List<Case>> groups = new ArrayList<>();
        for (String program : List.of(WRITE_LAT, READ_LAT)) {
            if (depth == FaultKind.MAJOR && program.equals(WRITE_LAT)) {
                continue;
            }
            List<Case> group = new ArrayList<>(List.of(new Case(program, RegistrationMode.PINNED, null)));
            for (RegistrationMode mode : MODES) {
                if (mode != RegistrationMode.PINNED) {
                    group.add(new Case(program, mode, depth));
                }
            }
            groups.add(group);
        }
        return groups;
    }

    /** The cases of one program and mode on nodes this experiment starts: none first, its reference. */
    private static List<Case> cases(String program, RegistrationMode mode) {
        List<Case> cases = new ArrayList<>();
        cases.add(new Case(program, mode, null));
        if (mode != RegistrationMode.PINNED) {
            cases.add(new Case(program, mode, FaultKind.MINOR));
            // ib_write_lat's responder spins on its buffer: a page paged out would be faulted back by its CPU, not the NIC.
            if (program.equals(READ_LAT)) {
                cases.add(new Case(program, mode, FaultKind.MAJOR));
            }
        }
        return cases;
    }

    /**
     * Brings the nodes' paths up to speed before anything is recorded, as the bench does: ib_write_bw,
     * then (full size) every case once, the fault paths included, then, on nodes in this JVM,
     * ib_write_lat runs until this JVM's compilers stay quiet through one (at most ten). A compiler
     * thread at work takes one of few cores from the nodes and moves a typical latency by hundreds of
     * microseconds.
     */
    private static void warmUp(VerbsNodes nodes, Shape shape, List<List<Case>> groups, PrintWriter progress) {
        progress.println("fault-cost: warming up ...");
        progress.flush();
        nodes.programs().writeBandwidthMbPerSec(nodes.requesterPlace(), nodes.responderPlace(), 65536, shape.warmupSeconds());
        if (shape.rounds() < 2) {
            return;
        }
        for (List<Case> group : groups) {
            for (Case c : group) {
                measure(nodes, c, shape);
            }
        }
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        if (!nodes.embedded() || jit == null || !jit.isCompilationTimeMonitoringSupported()) {
            return;
        }
        for (int i = 0; i < 10; i++) {
            long compiledMs = jit.getTotalCompilationTime();
            measure(nodes, new Case(WRITE_LAT, RegistrationMode.PINNED, null), shape);
            if (jit.getTotalCompilationTime() == compiledMs) {
                return;
            }
        }
    }

    /**
     * A group of cases, rounds alternating them, each case's median and what its fault adds against the
     * group's first case, run in the same round. Where every touch is followed by a take, each iteration
     * meets a fault and the typical (median) latency carries it; where only a share are (a running
     * cluster's pressure), the mean does, over the faults an iteration met.
     */
    private static List<Row> measureCases(VerbsNodes nodes, List<Case> cases, Shape shape, PrintWriter progress) {
        Map<Case, List<Sample>> samples = new LinkedHashMap<>();
        for (int round = 0; round < shape.rounds(); round++) {
            for (Case c : cases) {
                Sample sample = measure(nodes, c, shape);
                samples.computeIfAbsent(c, k -> new ArrayList<>()).add(sample);
                progress.printf(Locale.ROOT, "fault-cost: %s, round %d: typical %.1f us, %d pages taken, %d faults, %d RNR NAKs%n", c.label(),
                        round + 1, sample.row().typicalUs(), sample.taken(), sample.minorFaults() + sample.majorFaults(), sample.rnrNaks());
                progress.flush();
            }
        }
        List<Sample> reference = samples.get(cases.get(0));
        boolean everyTouch = shape.fraction() >= 1;
        List<Row> rows = new ArrayList<>();
        for (Case c : cases) {
            List<Sample> mine = samples.get(c);
            // Paired by round: each run against the reference run in its round, so the machine's drift between rounds falls on both.
            double[] added = new double[mine.size()];
            for (int round = 0; round < mine.size(); round++) {
                Sample s = mine.get(round);
                Sample ref = reference.get(round);
                added[round] = everyTouch ? (s.row().typicalUs() - ref.row().typicalUs()) * c.roundTripsPerReport()
                        : (s.row().averageUs() - ref.row().averageUs()) * c.roundTripsPerReport() * s.row().iterations() / Math.max(1, s.taken());
            }
            Arrays.sort(added);
            rows.add(new Row(c, VerbsNodes.median(mine, s -> s.row().typicalUs()), c.taken() == null ? 0 : added[added.length / 2]));
        }
        return rows;
    }

    /** One run of a case; on nodes this experiment started, with the case's pressure set on the responder's NIC for the run. */
    private static Sample measure(VerbsNodes nodes, Case c, Shape shape) {
        MemoryPressure pressure = nodes.embedded() ? nodes.responder().nic().memoryPressure() : null;
        if (pressure != null) {
            pressure.set(c.taken() == null ? 0 : shape.fraction(), c.taken() == null ? FaultKind.MINOR : c.taken());
        }
        try {
            NodeStats responderBefore = nodes.responderStats();
            NodeStats requesterBefore = nodes.requesterStats();
            VerbsPerftest.LatencyRow row = nodes.programs().latency(c.program(), nodes.requesterPlace(), nodes.responderPlace(),
                    List.of("-s", String.valueOf(SIZE), "-n", String.valueOf(shape.iterations())),
                    Map.of("PAGEWIRE_VERBS_REGISTRATION", c.mode().name()));
            if (row == null) {
                throw new IllegalStateException(c.label() + " failed: " + nodes.programs().failure() + "\nresponder's counters:\n"
                        + nodes.responderStats().counted());
            }
            NodeStats responder = nodes.responderStats();
            NodeStats requester = nodes.requesterStats();
            return new Sample(row, responder.since(responderBefore, NicCounter.PRESSURE_RECLAIMS),
                    responder.since(responderBefore, NicCounter.TLB_DESTINATION_FIRST_MISSES)
                            + responder.since(responderBefore, NicCounter.TLB_SOURCE_FIRST_MISSES),
                    responder.since(responderBefore, NicCounter.RECEIVE_FAULTS_MINOR) + responder.since(responderBefore, NicCounter.SEND_FAULTS_MINOR),
                    responder.since(responderBefore, NicCounter.RECEIVE_FAULTS_MAJOR) + responder.since(responderBefore, NicCounter.SEND_FAULTS_MAJOR),
                    responder.since(responderBefore, NicCounter.RNR_NAKS_SENT),
                    responder.timer(FAULT_SERVICE).since(responderBefore.timer(FAULT_SERVICE)).meanUs(),
                    requester.timer(NIC_WAIT, "cause=rnr").since(requesterBefore.timer(NIC_WAIT, "cause=rnr")).meanUs());
        } finally {
            if (pressure != null) {
                pressure.set(0, FaultKind.MINOR);
            }
        }
    }

    private static Optional<Row> find(List<Row> rows, String program, RegistrationMode mode, FaultKind taken) {
        return rows.stream().filter(r -> r.c().program().equals(program) && r.c().mode() == mode && r.c().taken() == taken).findFirst();
    }

    /** The paper's figure beside a row: NP-RDMA's for a fault served in place, its ODP comparison for one through RNR. */
    private static String papers(Row r) {
        if (r.c().taken() == null) {
            return "-";
        }
        boolean throughRnr = r.median().rnrNaks() > 0;
        if (throughRnr) {
            return "100x+ (ODP's RNR path)";
        }
        return r.c().taken() == FaultKind.MINOR ? "3.5-5.7" : "~60";
    }

    static ExperimentResult result(Shape shape, long swapReadNs, List<Row> rows) {
        List<List<Object>> table = new ArrayList<>();
        List<String> categories = new ArrayList<>();
        double[] added = new double[rows.size()];
        for (Row r : rows) {
            Sample s = r.median();
            table.add(List.of(r.c().program(), r.c().mode().name(), r.c().taken() == null ? "none" : r.c().taken().name(), s.row().iterations(),
                    s.taken(), s.tlbMisses(), s.minorFaults(), s.majorFaults(), s.rnrNaks(), round(s.faultServiceUs()), round(s.rnrBackoffUs()),
                    s.row().typicalUs(), s.row().p99Us(), r.c().taken() == null ? "-" : String.format(Locale.ROOT, "%.1f", r.addedPerFaultUs()),
                    papers(r)));
        }
        List<Row> taken = rows.stream().filter(r -> r.c().taken() != null).toList();
        for (int i = 0; i < taken.size(); i++) {
            categories.add(taken.get(i).c().label().replace("ib_", ""));
            added[i] = Math.max(0, taken.get(i).addedPerFaultUs());
        }
        Map<String, double[][]> series = new LinkedHashMap<>();
        series.put("added us per fault", new double[][] {new double[taken.size()], Arrays.copyOf(added, taken.size())});

        // A running cluster's pressure has one depth: the claims about the other are not judged.
        Optional<Row> minorInPlaceWrite = find(rows, WRITE_LAT, RegistrationMode.PIN_ON_MISS, FaultKind.MINOR);
        Optional<Row> minorInPlaceRead = find(rows, READ_LAT, RegistrationMode.PIN_ON_MISS, FaultKind.MINOR);
        Optional<Row> majorInPlace = find(rows, READ_LAT, RegistrationMode.PIN_ON_MISS, FaultKind.MAJOR);
        List<Row> throughRnr = taken.stream().filter(r -> r.c().mode() == RegistrationMode.ON_DEMAND).toList();
        double swapReadUs = swapReadNs / 1e3;
        List<Row> shadowMinor = taken.stream().filter(r -> r.c().mode() == RegistrationMode.SHADOW && r.c().taken() == FaultKind.MINOR).toList();
        Predicate<Row> accounted = r -> accounted(r);

        List<Claim> claims = new ArrayList<>();
        minorInPlaceRead.ifPresent(read -> {
            // Judged on ib_read_lat, whose responder does not spin: ib_write_lat's two programs both spin, leaving the nodes no core of
            // their own on a 2-core machine, so the pin's few microseconds of work come back as tens there (both are shown).
            double inPlaceMinor = read.addedPerFaultUs();
            claims.add(new Claim("a minor fault served in place (PIN_ON_MISS: the request waits while the page is pinned) adds a few"
                    + " microseconds (NP-RDMA: 3.5-5.7 us)", Math.abs(inPlaceMinor) <= 10,
                    String.format(Locale.ROOT, "%.1f us per fault under ib_read_lat; a few means at most 10, and a figure below -10 means"
                            + " the runs moved more than a fault costs (ib_write_lat %.1f us: its two spinning programs leave the nodes no core"
                            + " of their own here)", inPlaceMinor,
                            minorInPlaceWrite.map(Row::addedPerFaultUs).orElse(Double.NaN))));
            double cheapestRnr = throughRnr.stream().mapToDouble(Row::addedPerFaultUs).min().orElse(Double.NaN);
            // A cost below a microsecond is below what these runs resolve: the ratio is taken against 1 us then.
            double ratio = cheapestRnr / Math.max(1.0, inPlaceMinor);
            claims.add(new Claim("a fault served through RNR NAK and the requester's back-off (ON_DEMAND) costs two or more orders of"
                    + " magnitude more than a minor fault in place", ratio >= 100,
                    String.format(Locale.ROOT, "cheapest through RNR %.0f us (%s) against %.1f us in place (ib_read_lat%s): %.0fx", cheapestRnr,
                            throughRnr.stream().map(r -> String.format(Locale.ROOT, "%s %.0f us", r.c().label(), r.addedPerFaultUs()))
                                    .collect(Collectors.joining(", ")), inPlaceMinor,
                            inPlaceMinor < 1 ? ", below what these runs resolve: counted as 1 us" : "", ratio)));
        });
        majorInPlace.ifPresent(major -> claims.add(new Claim("a major fault served in place costs what the swap device model says"
                + " (NP-RDMA: ~60 us on its SSD)",
                major.median().faultServiceUs() >= 0.9 * swapReadUs && major.median().faultServiceUs() <= swapReadUs + 50,
                String.format(Locale.ROOT, "the node served each in %.0f us against the modelled device's %.0f us read; a READ that met one"
                        + " took %.0f us longer under ib_read_lat (PIN_ON_MISS)", major.median().faultServiceUs(), swapReadUs,
                        major.addedPerFaultUs()))));
        if (!shadowMinor.isEmpty()) {
            claims.add(new Claim("a shadow page table follows the kernel's, so a page taken from the NIC while it stays in memory costs SHADOW"
                    + " no fault",
                    shadowMinor.stream().allMatch(r -> r.median().minorFaults() + r.median().majorFaults() + r.median().rnrNaks() == 0
                            && r.median().taken() > 0),
                    shadowMinor.stream().map(r -> String.format(Locale.ROOT, "%s: %d pages taken, %d faults, %d RNR NAKs", r.c().label(),
                            r.median().taken(), r.median().minorFaults() + r.median().majorFaults(), r.median().rnrNaks()))
                            .collect(Collectors.joining("; "))));
        }
        claims.add(new Claim("the node's meters account for the faults: per page taken a TLB miss and pin (PIN_ON_MISS) or a NIC page fault"
                + " and RNR NAK (ON_DEMAND) under MINOR, a major fault under MAJOR, and none without the pressure",
                rows.stream().allMatch(accounted),
                rows.stream().filter(accounted.negate()).map(r -> r.c().label() + ": " + r.median()).findFirst()
                        .orElse(String.format(Locale.ROOT, "all %d runs; the pressure took the page after %.0f %% of the touches",
                                rows.size(), 100 * shape.fraction()))));
        return new ExperimentResult(List.of("program", "mode", "taken", "iterations", "pages taken", "TLB misses", "minor faults",
                "major faults", "RNR NAKs", "fault service us", "RNR back-off us", "typical us", "p99 us", "added us per fault", "paper us"), table,
                new ExperimentResult.Plot("fault-cost: round-trip latency a fault adds, by mechanism", "program, mode, taken",
                        "added us per fault", false, series, categories),
                claims);
    }

    private static double round(double us) {
        return Math.round(us * 10) / 10.0;
    }

    /**
     * Whether a run's counters explain it, within a tenth (a touch may come while its page is being
     * taken): no fault without the pressure; under MINOR a TLB miss and pin per page taken (PIN_ON_MISS),
     * a NIC page fault and RNR NAK per page taken (ON_DEMAND), nothing for SHADOW; under MAJOR a major
     * fault per page taken, a TLB miss before each (PIN_ON_MISS, ON_DEMAND) and an RNR NAK with each
     * where the fault goes through RNR (ON_DEMAND, SHADOW's READ source).
     */
    static boolean accounted(Row r) {
        Sample s = r.median();
        long slack = 2 + s.taken() / 10;
        if (r.c().taken() == null) {
            return s.minorFaults() + s.majorFaults() == 0 && s.taken() == 0;
        }
        if (r.c().taken() == FaultKind.MAJOR) {
            boolean perTaken = Math.abs(s.majorFaults() - s.taken()) <= slack;
            return switch (r.c().mode()) {
                case PIN_ON_MISS -> perTaken && s.tlbMisses() >= s.taken() - slack;
                case ON_DEMAND -> perTaken && s.tlbMisses() >= s.taken() - slack && s.rnrNaks() >= s.majorFaults() - slack;
                case SHADOW -> perTaken && s.rnrNaks() >= s.majorFaults() - slack;
                case PINNED -> s.majorFaults() == 0;
            };
        }
        long faults = s.minorFaults() + s.majorFaults();
        return switch (r.c().mode()) {
            case PIN_ON_MISS -> Math.abs(s.tlbMisses() - s.taken()) <= slack && faults == 0;
            case ON_DEMAND -> Math.abs(s.minorFaults() - s.taken()) <= slack && s.rnrNaks() >= faults - slack;
            case SHADOW, PINNED -> faults == 0;
        };
    }
}
