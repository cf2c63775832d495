package io.pagewire.tools.experiment;

import io.pagewire.config.CountedEvent;
import io.pagewire.config.Meter;
import io.pagewire.kernel.FaultKind;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.metrics.Metric;
import io.pagewire.node.nic.FaultAnswer;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.tools.perf.VerbsPerftest;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.ToLongFunction;

/**
 * {@code odp-pitfalls} (Fukuoka, Sato and Taura, ISPASS 2021): where an on-demand NIC's page fault
 * meets the network's loss recovery, it costs the requester's acknowledgement timeout, three to four
 * orders of magnitude more than a fault served in place. Debian's {@code ib_write_lat} runs unmodified
 * through the verbs library between two nodes with perftest's default timeout ({@code -u 14}: 67 ms),
 * under cases that differ in one thing each: the responder's memory pressure (a page taken from the NIC
 * after a set share of touches, so the next touch faults), how its NIC answers a fault (RNR NAK, or
 * dropping the request as a NIC that cannot hold it does: {@code pagewire.nic.faultAnswer}), the
 * fabric's loss, and the registration (ON_DEMAND, or PIN_ON_MISS, which serves the fault in place).
 * What a case's events cost is read from perftest's average against the case without them, and the
 * nodes' meters count the events: faults, RNR NAKs sent and received, requests dropped on a fault,
 * packets lost, timeouts. Against a running cluster the pressure, answer and loss are
 * what its nodes were started with, on throughout, and the registration is what the cases vary.
 */
public final class OdpPitfallsExperiment implements Experiment {
    private static final String WRITE_LAT = "ib_write_lat";
    private static final int SIZE = 64;
    /** perftest's default {@code -u}: the acknowledgement timeout is 4.096 us times 2 to this. */
    private static final int TIMEOUT_EXPONENT = 14;
    static final long ACK_TIMEOUT_NS = 4096L << TIMEOUT_EXPONENT;
    /**
     * An iteration whose round trip took this share of the timeout or more waited for one: nothing
     * else here comes near (an RNR back-off is under a millisecond, a descheduled program tens of them
     * at worst).
     */
    static final double TAIL_FRACTION = 0.8;
    private static final Meter NIC_WAIT = Metric.NIC_WAIT_TIME.meter();
    /** What a running cluster's nodes were started with: the pressure, the fault answer and the fabric's loss. */
    private static final String PRESSURE = Metric.MEMORY_PRESSURE.meter().prometheusName();
    private static final String ANSWER = Metric.FAULT_ANSWER.meter().prometheusName();
    private static final String LOSS = Metric.INJECTED_LOSS.meter().prometheusName();
    private static final String INJECTED = Metric.INJECTED_FAULTS.meter().prometheusName();

    /** How big a run is: iterations per case, the share of touches after which a page is taken, and the fabric's loss rate. */
    record Shape(int iterations, double faultRate, double lossRate) {
    }

    static final Shape DEFAULT = new Shape(3000, 0.01, 0.002);
    static final Shape REDUCED = new Shape(500, 0.02, 0.004);

    @Override
    public String name() {
        return "odp-pitfalls";
    }

    @Override
    public String paper() {
        return "Fukuoka, Sato and Taura (ISPASS 2021), on ConnectX NICs: an ODP page fault that ends in the network's loss recovery (a"
                + " dropped request, a fault meeting a packet loss) costs the retransmission timeout, 3-4 orders of magnitude more than a"
                + " common fault.";
    }

    /** How often a case's responder faults: never, after the shape's share of touches, or on every message. */
    enum Faults { NONE, SOME, EVERY_MESSAGE }

    /** One case: the registration, the NIC's answer to a fault, how often it faults, and whether the fabric loses packets. */
    record Case(String label, RegistrationMode mode, FaultAnswer answer, Faults faults, boolean loss) {
        double faultRate(Shape shape) {
            return switch (faults) {
                case NONE -> 0;
                case SOME -> shape.faultRate();
                case EVERY_MESSAGE -> 1;
            };
        }
    }

    /**
     * The cases. Where faults meet loss, every message faults, so that losses land on faults' RNR
     * exchanges often enough to count; a dropped fault costs a timeout each, so those cases fault rarely.
     */
    static final List<Case> CASES = List.of(
            new Case("none", RegistrationMode.ON_DEMAND, FaultAnswer.RNR_NAK, Faults.NONE, false),
            new Case("faults, RNR NAK", RegistrationMode.ON_DEMAND, FaultAnswer.RNR_NAK, Faults.SOME, false),
            new Case("faults, dropped", RegistrationMode.ON_DEMAND, FaultAnswer.DROP, Faults.SOME, false),
            new Case("loss", RegistrationMode.ON_DEMAND, FaultAnswer.RNR_NAK, Faults.NONE, true),
            new Case("a fault per message, RNR NAK, loss", RegistrationMode.ON_DEMAND, FaultAnswer.RNR_NAK, Faults.EVERY_MESSAGE, true),
            new Case("PIN_ON_MISS: faults, dropped, loss", RegistrationMode.PIN_ON_MISS, FaultAnswer.DROP, Faults.SOME, true));

    /**
     * What one case measured: perftest's iterations, what both nodes counted meanwhile, and the
     * requester's mean RNR back-off (its meter, in microseconds; 0 when there was none).
     */
    record Sample(VerbsPerftest.LatencyRun run, long taken, long faults, long tlbMisses, long rnrSent, long rnrReceived, long dropped,
            long lost, long timeouts, double rnrBackoffUs) {
        VerbsPerftest.LatencyRow row() {
            return run.row();
        }

        /** The iterations in the tail: those whose round trip took at least {@link #TAIL_FRACTION} of the timeout. */
        int tail() {
            return run.atLeast(TAIL_FRACTION * ACK_TIMEOUT_NS / 1e3 / 2);
        }

        /** The tail's mean round trip in milliseconds (ib_write_lat reports half of one), NaN without a tail. */
        double tailRoundTripMs() {
            return 2 * run.meanAtLeast(TAIL_FRACTION * ACK_TIMEOUT_NS / 1e3 / 2) / 1e3;
        }
    }

    @Override
    public ExperimentResult run(ExperimentSettings settings, PrintWriter progress) throws Exception {
        Shape shape = settings.reduced() ? REDUCED : DEFAULT;
        try (VerbsNodes nodes = VerbsNodes.open(settings, c -> {
            c.nic().randomSeed(settings.seed());
            c.fabric().faultSeed(settings.seed());
        }, WRITE_LAT, "ib_write_bw")) {
            List<Case> cases = CASES;
            if (!nodes.embedded()) {
                NodeStats responder = nodes.responderStats();
                double pressure = responder.sum(PRESSURE);
                if (pressure == 0) {
                    throw new IllegalArgumentException("odp-pitfalls: " + nodes.responderId() + " takes no pages from its NIC"
                            + " (pagewire.nic.reclaimAfterAccess=0): start the cluster's nodes with --set pagewire.nic.reclaimAfterAccess=0.02"
                            + " and, for the pitfalls, --set pagewire.nic.faultAnswer=DROP or --set pagewire.fabric.lossRate=0.004 to run"
                            + " this experiment against them");
                }
                FaultAnswer answer = responder.sum(ANSWER, "answer=drop") > 0 ? FaultAnswer.DROP : FaultAnswer.RNR_NAK;
                double loss = Math.max(responder.sum(LOSS), nodes.requesterStats().sum(LOSS));
                shape = new Shape(shape.iterations(), pressure, loss);
                cases = clusterCases(answer, loss > 0);
            }
            progress.printf(Locale.ROOT, "odp-pitfalls: %s, ib_write_lat, %d iterations of %d bytes, a page taken after %.1f %% of touches,"
                    + " %.2f %% of packets lost, acknowledgement timeout %.1f ms ...%n", nodes.where(), shape.iterations(), SIZE,
                    100 * shape.faultRate(), 100 * shape.lossRate(), ACK_TIMEOUT_NS / 1e6);
            progress.flush();
            nodes.programs().writeBandwidthMbPerSec(nodes.requesterPlace(), nodes.responderPlace(), 65536, settings.reduced() ? 2 : 10);
            measure(nodes, cases.get(0), shape); // the latency path's first run, which compiles it, is not recorded
            Map<Case, Sample> samples = new LinkedHashMap<>();
            for (Case c : cases) {
                Sample s = measure(nodes, c, shape);
                samples.put(c, s);
                progress.printf(Locale.ROOT, "odp-pitfalls: %s: typical %.1f us, longest %.0f us, %d faults, %d RNR NAKs, %d dropped, %d lost,"
                        + " %d timeouts%n", c.label(), s.row().typicalUs(), s.row().maxUs(), s.faults(), s.rnrSent(), s.dropped(), s.lost(),
                        s.timeouts());
                progress.flush();
            }
            return nodes.embedded() ? result(shape, samples) : clusterResult(samples);
        }
    }

    /**
     * The cases against a running cluster, whose pressure, fault answer and loss are what its nodes were
     * started with and stay on: the registration is what differs. PINNED, whose pages the pressure never
     * takes, shows the loss alone; ON_DEMAND meets the faults with the cluster's answer and loss;
     * PIN_ON_MISS serves the same faults in place, the mitigation.
     */
    static List<Case> clusterCases(FaultAnswer answer, boolean loss) {
        String events = (answer == FaultAnswer.DROP ? "dropped" : "RNR NAK") + (loss ? ", loss" : "");
        return List.of(new Case(loss ? "PINNED: loss" : "PINNED: none", RegistrationMode.PINNED, answer, Faults.NONE, loss),
                new Case("ON_DEMAND: faults, " + events, RegistrationMode.ON_DEMAND, answer, Faults.SOME, loss),
                new Case("PIN_ON_MISS: faults, " + events, RegistrationMode.PIN_ON_MISS, answer, Faults.SOME, loss));
    }

    /** One case's run; on nodes this experiment started, with the case's pressure, fault answer and loss set for the run. */
    private static Sample measure(VerbsNodes nodes, Case c, Shape shape) {
        if (nodes.embedded()) {
            nodes.responder().nic().memoryPressure().set(c.faultRate(shape), FaultKind.MINOR);
            nodes.responder().nic().faultAnswer(c.answer());
            for (PagewireNode node : List.of(nodes.requester(), nodes.responder())) {
                node.fabric().faults().rates(c.loss() ? shape.lossRate() : 0, 0, 0);
            }
        }
        try {
            NodeStats requesterBefore = nodes.requesterStats();
            NodeStats responderBefore = nodes.responderStats();
            VerbsPerftest.LatencyRun run = nodes.programs().latencyWithIterations(WRITE_LAT, nodes.requesterPlace(), nodes.responderPlace(),
                    List.of("-s", String.valueOf(SIZE), "-n", String.valueOf(shape.iterations()), "-u", String.valueOf(TIMEOUT_EXPONENT)),
                    Map.of("PAGEWIRE_VERBS_REGISTRATION", c.mode().name()));
            if (run == null) {
                throw new IllegalStateException(c.label() + " failed: " + nodes.programs().failure() + "\nmeters:\n"
                        + nodes.requesterStats().counted() + "\n" + nodes.responderStats().counted());
            }
            NodeStats requester = nodes.requesterStats();
            NodeStats responder = nodes.responderStats();
            // ib_write_lat is a ping-pong of WRITEs: both nodes answer requests and time out, and a running cluster's nodes all
            // carry its pressure, so each event is counted on both (on nodes this experiment starts, only the responder faults).
            ToLongFunction<CountedEvent> both = e -> requester.since(requesterBefore, e) + responder.since(responderBefore, e);
            long lost = Math.round(requester.since(requesterBefore, INJECTED, "kind=loss") + responder.since(responderBefore, INJECTED, "kind=loss"));
            return new Sample(run, both.applyAsLong(NicCounter.PRESSURE_RECLAIMS),
                    both.applyAsLong(NicCounter.RECEIVE_FAULTS_MINOR) + both.applyAsLong(NicCounter.RECEIVE_FAULTS_MAJOR),
                    both.applyAsLong(NicCounter.TLB_DESTINATION_FIRST_MISSES), both.applyAsLong(NicCounter.RNR_NAKS_SENT),
                    both.applyAsLong(NicCounter.RNR_NAKS_RECEIVED), both.applyAsLong(NicCounter.FAULT_DROPPED_REQUESTS), lost,
                    both.applyAsLong(NicCounter.ACK_TIMEOUTS),
                    requester.timer(NIC_WAIT, "cause=rnr").since(requesterBefore.timer(NIC_WAIT, "cause=rnr")).meanUs());
        } finally {
            if (nodes.embedded()) {
                nodes.responder().nic().memoryPressure().set(0, FaultKind.MINOR);
                nodes.responder().nic().faultAnswer(FaultAnswer.RNR_NAK);
                for (PagewireNode node : List.of(nodes.requester(), nodes.responder())) {
                    node.fabric().faults().rates(0, 0, 0);
                }
            }
        }
    }

    /** The result on nodes this experiment started: every case, each claim judged on the case that isolates it. */
    static ExperimentResult result(Shape shape, Map<Case, Sample> samples) {
        double timeoutMs = ACK_TIMEOUT_NS / 1e6;
        Sample rnr = sample(samples, "faults, RNR NAK");
        Sample dropped = sample(samples, "faults, dropped");
        Sample loss = sample(samples, "loss");
        Sample both = sample(samples, "a fault per message, RNR NAK, loss");
        Sample mitigated = sample(samples, "PIN_ON_MISS: faults, dropped, loss");
        // A count of events is exact; which iteration an event lands in is not quite (two in one, one at the run's end).
        long slack = 2;
        double ratio = dropped.tailRoundTripMs() / (rnr.rnrBackoffUs() / 1e3);
        List<Claim> claims = List.of(
                new Claim("a fault answered with RNR NAK (ODP's common fault) costs the RNR back-off, under a millisecond or so, and no timeout",
                        rnr.faults() > 0 && rnr.rnrReceived() >= rnr.faults() && rnr.timeouts() == 0 && rnr.tail() == 0
                                && rnr.rnrBackoffUs() < 5_000,
                        String.format(Locale.ROOT, "%d faults, %d RNR NAKs, %.2f ms backed off each, %d timeouts, %d iterations in the tail",
                                rnr.faults(), rnr.rnrReceived(), rnr.rnrBackoffUs() / 1e3, rnr.timeouts(), rnr.tail())),
                new Claim("a fault whose request the NIC drops waits for the requester's timeout: each such iteration takes the timeout, two"
                        + " orders of magnitude above the common fault's back-off (three to four above a fault served in place: fault-cost's"
                        + " few us)",
                        dropped.faults() > 0 && Math.abs(dropped.timeouts() - dropped.dropped()) <= slack
                                && Math.abs(dropped.tail() - dropped.dropped()) <= slack && dropped.tailRoundTripMs() >= timeoutMs && ratio >= 30,
                        String.format(Locale.ROOT, "%d faults, %d requests dropped, %d timeouts, %d iterations in the tail taking %.1f ms"
                                + " against the %.1f ms timeout: %.0fx the %.2f ms back-off of a fault answered with RNR NAK", dropped.faults(),
                                dropped.dropped(), dropped.timeouts(), dropped.tail(), dropped.tailRoundTripMs(), timeoutMs, ratio,
                                rnr.rnrBackoffUs() / 1e3)),
                new Claim("a lost packet costs the same timeout: a lossy fabric's tail is its timeouts, each explained by a loss",
                        loss.lost() > 0 && loss.timeouts() <= loss.lost() + slack && loss.tail() <= loss.timeouts() + slack
                                && loss.tail() > 0 && loss.tailRoundTripMs() >= timeoutMs,
                        String.format(Locale.ROOT, "%d packets lost, %d timeouts, %d iterations in the tail taking %.1f ms", loss.lost(),
                                loss.timeouts(), loss.tail(), loss.tailRoundTripMs())),
                new Claim("faults and loss together: a fault costs the RNR back-off unless a loss meets it; an RNR NAK lost on the way"
                        + " leaves the requester waiting for its timeout, and every timeout is a loss's",
                        both.faults() > 0 && both.timeouts() >= both.rnrSent() - both.rnrReceived() && both.timeouts() <= both.lost() + slack
                                && both.tail() <= both.timeouts() + slack,
                        String.format(Locale.ROOT, "%d faults, %d RNR NAKs sent and %d received (%d lost on the way), %d packets lost, %d"
                                + " timeouts, %d iterations in the tail", both.faults(), both.rnrSent(), both.rnrReceived(),
                                both.rnrSent() - both.rnrReceived(), both.lost(), both.timeouts(), both.tail())),
                new Claim("serving the fault in place (PIN_ON_MISS) removes the pitfall: a NIC that would drop a faulting request drops"
                        + " none, and the only timeouts left are the losses'",
                        mitigated.tlbMisses() > 0 && mitigated.dropped() == 0 && mitigated.rnrSent() == 0
                                && mitigated.timeouts() <= mitigated.lost() + slack && mitigated.tail() <= mitigated.timeouts() + slack,
                        String.format(Locale.ROOT, "%d pages taken, %d TLB misses served in place, %d dropped, %d RNR NAKs, %d packets lost,"
                                + " %d timeouts, %d iterations in the tail", mitigated.taken(), mitigated.tlbMisses(), mitigated.dropped(),
                                mitigated.rnrSent(), mitigated.lost(), mitigated.timeouts(), mitigated.tail())));
        return report(samples, claims);
    }

    /**
     * The result against a running cluster: what its pressure, fault answer and loss cost ON_DEMAND,
     * judged by the meters (every timeout a dropped request's or a loss's, every tail iteration a
     * timeout's), and that PIN_ON_MISS, meeting the same, drops no request and waits for no fault.
     */
    static ExperimentResult clusterResult(Map<Case, Sample> samples) {
        List<Sample> rows = List.copyOf(samples.values());
        Sample pinned = rows.get(0);
        Sample onDemand = rows.get(1);
        Sample mitigated = rows.get(2);
        long slack = 2;
        double timeoutMs = ACK_TIMEOUT_NS / 1e6;
        List<Claim> claims = List.of(
                new Claim("over the cluster's pressure, fault answer and loss, an on-demand NIC's tail is its timeouts, each a dropped"
                        + " request's or a loss's",
                        onDemand.faults() > 0 && onDemand.timeouts() <= onDemand.dropped() + onDemand.lost() + slack
                                && onDemand.timeouts() >= onDemand.dropped() - slack && onDemand.tail() <= onDemand.timeouts() + slack,
                        String.format(Locale.ROOT, "ON_DEMAND: %d faults, %d RNR NAKs, %d requests dropped, %d packets lost, %d timeouts, %d"
                                + " iterations in the tail%s", onDemand.faults(), onDemand.rnrSent(), onDemand.dropped(), onDemand.lost(),
                                onDemand.timeouts(), onDemand.tail(), onDemand.tail() == 0 ? ""
                                        : String.format(Locale.ROOT, " taking %.1f ms against the %.1f ms timeout", onDemand.tailRoundTripMs(),
                                                timeoutMs))),
                new Claim("serving the fault in place (PIN_ON_MISS) removes the pitfall: no request dropped, no RNR NAK, and the only"
                        + " timeouts left are the losses', as PINNED's",
                        mitigated.tlbMisses() > 0 && mitigated.dropped() == 0 && mitigated.rnrSent() == 0
                                && mitigated.timeouts() <= mitigated.lost() + slack && mitigated.tail() <= mitigated.timeouts() + slack,
                        String.format(Locale.ROOT, "PIN_ON_MISS: %d pages taken, %d TLB misses served in place, %d dropped, %d RNR NAKs, %d"
                                + " packets lost, %d timeouts, %d iterations in the tail; PINNED: %d lost, %d timeouts, %d in the tail",
                                mitigated.taken(), mitigated.tlbMisses(), mitigated.dropped(), mitigated.rnrSent(), mitigated.lost(),
                                mitigated.timeouts(), mitigated.tail(), pinned.lost(), pinned.timeouts(), pinned.tail())));
        return report(samples, claims);
    }

    /** The table and plot of the cases' samples, with {@code claims}. */
    private static ExperimentResult report(Map<Case, Sample> samples, List<Claim> claims) {
        List<List<Object>> table = new ArrayList<>();
        List<String> categories = new ArrayList<>();
        double[] max = new double[samples.size()];
        double[] p999 = new double[samples.size()];
        int i = 0;
        for (Map.Entry<Case, Sample> e : samples.entrySet()) {
            Case c = e.getKey();
            Sample s = e.getValue();
            table.add(List.of(c.label(), c.mode().name(), c.answer().name(), s.row().iterations(), s.taken(),
                    c.mode() == RegistrationMode.PIN_ON_MISS ? s.tlbMisses() + " (TLB misses)" : s.faults(), s.rnrSent(), s.rnrReceived(),
                    round(s.rnrBackoffUs() / 1e3), s.dropped(), s.lost(), s.timeouts(), s.tail(),
                    s.tail() == 0 ? "-" : round(s.tailRoundTripMs()), s.row().typicalUs(), round(2 * s.row().maxUs() / 1e3)));
            categories.add(c.label());
            max[i] = 2 * s.row().maxUs() / 1e3;
            p999[i] = 2 * s.row().p999Us() / 1e3;
            i++;
        }
        Map<String, double[][]> series = new LinkedHashMap<>();
        series.put("99.9th percentile round trip (ms)", new double[][] {new double[samples.size()], p999});
        series.put("longest round trip (ms)", new double[][] {new double[samples.size()], max});

        return new ExperimentResult(List.of("case", "mode", "fault answer", "iterations", "pages taken", "NIC faults", "RNR NAKs sent",
                "RNR NAKs received", "RNR back-off ms", "requests dropped", "packets lost", "timeouts", "tail iterations", "tail round trip ms",
                "typical us (one way)", "longest round trip ms"), table,
                new ExperimentResult.Plot("odp-pitfalls: ib_write_lat's tail", "case", "round trip (ms)", false, series, categories),
                claims);
    }

    private static Sample sample(Map<Case, Sample> samples, String label) {
        return samples.entrySet().stream().filter(e -> e.getKey().label().equals(label)).map(Map.Entry::getValue).findFirst().orElseThrow();
    }

    private static double round(double v) {
        return Math.round(v * 100) / 100.0;
    }
}
