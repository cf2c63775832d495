package io.pagewire.tools.cli;

import io.pagewire.client.ConnectOptions;
import io.pagewire.node.nic.TlbIndexing;
import io.pagewire.tools.experiment.Claim;
import io.pagewire.tools.experiment.Experiment;
import io.pagewire.tools.experiment.ExperimentReport;
import io.pagewire.tools.experiment.ExperimentResult;
import io.pagewire.tools.experiment.ExperimentSettings;
import io.pagewire.tools.experiment.FaultCostExperiment;
import io.pagewire.tools.experiment.ContextCacheExperiment;
import io.pagewire.tools.experiment.OdpPitfallsExperiment;
import io.pagewire.tools.experiment.PrefetchExperiment;
import io.pagewire.tools.experiment.NotificationExperiment;
import io.pagewire.tools.experiment.OvercommitExperiment;
import io.pagewire.tools.experiment.PinCacheExperiment;
import io.pagewire.tools.experiment.ReceiveFaultsExperiment;
import io.pagewire.tools.experiment.TlbSizeExperiment;
import io.pagewire.tools.experiment.TranslationOverheadExperiment;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.ParameterException;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/** {@code pagewire experiment NAME}: runs an experiment that reproduces a paper's result and says which of its claims held. */
@Command(name = "experiment", mixinStandardHelpOptions = true,
        description = {"Runs an experiment that reproduces a research system's result, on nodes it starts in this JVM.",
            "Given two HOST:PORTs, it runs against two nodes of a running cluster instead, through the SDK, sized from what the nodes",
            "report (their TLB, memory, swap and pin limits); what only a node's configuration sets (a TLB size sweep, a link delay) is the cluster's.",
            "The four that run stock verbs programs run them on this host, beside the nodes, or in the nodes' containers (--containers),",
            "over what the nodes were started with: fault-cost and odp-pitfalls their memory pressure (and fault answer and loss),",
            "context-cache their context cache.",
            "Prints the table beside the paper's claim, writes NAME.csv and NAME.png, and ends with one line per claim.",
            "Exit status 1 when a claim was not reproduced, 2 when the experiment cannot run as asked.",
            "Experiments: tlb-size (U-Net/MM: TLB hit rate and pinned pages against the TLB's size),",
            "translation-overhead (NetVM: a warm translation's cost to a small write, per mode, against static pinning),",
            "notification (NetVM: what noticing a notification costs by polling, a handler, or blocking),",
            "receive-faults (U-Net/MM's stall, NetVM's system buffer, ODP's RNR NAK: streaming into four times the receiver's memory),",
            "overcommit (ODP: applications registering more than can be pinned, run together on demand or in turns pinned),",
            "pin-cache (NetVM against a pinning cache: hit rate, pins and unpins as buffer pools outgrow the cache),",
            "fault-cost (NP-RDMA: ib_write_lat and ib_read_lat with a page fault per iteration, by mechanism),",
            "prefetch (ibv_advise_mr against ODP's first-use faults: ibv_rc_pingpong -o with and without -P),",
            "odp-pitfalls (ISPASS 2021: ib_write_lat's tail when a fault meets loss or the requester's timeout),",
            "context-cache (ScalaRNIC, Husky/Harmonic: ib_write_bw's message rate as -q outgrows the NIC's context cache)."})
final class ExperimentCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(index = "0", paramLabel = "NAME", description = "The experiment: ${COMPLETION-CANDIDATES}.", completionCandidates = Names.class)
    String name;

    @Parameters(index = "1", arity = "0..2", paramLabel = "HOST:PORT",
            description = "Two nodes of a running cluster: the sending application's, then the receiving one's (default: nodes in this JVM).")
    List<String> targets = new ArrayList<>();

    @Mixin
    ClientSecurityOptions security = new ClientSecurityOptions();

    @Option(names = "--seed", description = "Seed of every random choice (access order, RANDOM replacement); default: the clock.")
    Long seed;

    @Option(names = "--out", defaultValue = "pagewire-experiments", description = "Directory for NAME.csv and NAME.png (default ${DEFAULT-VALUE}).")
    Path out;

    @Option(names = "--reduced", description = "Run at the reduced size the test suite runs (seconds instead of minutes).")
    boolean reduced;

    @Option(names = "--containers", paramLabel = "NAME,NAME", split = ",",
            description = "With a running cluster's addresses: the two nodes' containers (the sending node's first), where the experiments"
                    + " that run stock verbs programs run them, with the image's library (default: on this host, beside the nodes).")
    List<String> containers = new ArrayList<>();

    @Option(names = "--page", paramLabel = "FILE",
            description = "A markdown page whose block '<!-- generated: experiment NAME -->' ... '<!-- end generated: experiment NAME -->' this"
                    + " run rewrites: the command, the commit and machine it ran on, the plot, the table and the claims (docs/experiments.md).")
    Path page;

    @Option(names = "--tlb-indexing", defaultValue = "hashed", description = "tlb-size: how a page picks its TLB set, hashed or low-bits (default ${DEFAULT-VALUE}).")
    String tlbIndexing;

    /** The experiments by name. */
    static Map<String, Experiment> experiments(TlbIndexing indexing) {
        Map<String, Experiment> all = new LinkedHashMap<>();
        for (Experiment experiment : List.of(new TlbSizeExperiment(indexing), new TranslationOverheadExperiment(), new NotificationExperiment(),
                new ReceiveFaultsExperiment(), new OvercommitExperiment(), new PinCacheExperiment(),
                new FaultCostExperiment(), new PrefetchExperiment(), new OdpPitfallsExperiment(), new ContextCacheExperiment())) {
            all.put(experiment.name(), experiment);
        }
        return all;
    }

    /** The names picocli lists in the help. */
    static final class Names implements Iterable<String> {
        @Override
        public Iterator<String> iterator() {
            return experiments(TlbIndexing.HASHED).keySet().iterator();
        }
    }

    @Override
    public Integer call() throws Exception {
        PrintWriter printer = spec.commandLine().getOut();
        TlbIndexing indexing;
        try {
            indexing = TlbIndexing.parse("--tlb-indexing", tlbIndexing);
        } catch (IllegalArgumentException e) {
            throw new ParameterException(spec.commandLine(), e.getMessage());
        }
        Experiment experiment = experiments(indexing).get(name);
        if (experiment == null) {
            throw new ParameterException(spec.commandLine(), "no experiment named '" + name + "'; there are: "
                    + String.join(", ", experiments(indexing).keySet()));
        }
        ExperimentSettings.RunningCluster cluster = null;
        if (!targets.isEmpty()) {
            if (targets.size() != 2) {
                throw new ParameterException(spec.commandLine(), "give two node addresses (the sending application's, then the receiving"
                        + " one's), or none to run on nodes in this JVM");
            }
            if (!containers.isEmpty() && containers.size() != 2) {
                throw new ParameterException(spec.commandLine(), "--containers takes the two nodes' containers, NAME,NAME (the sending"
                        + " node's first), not " + containers);
            }
            cluster = new ExperimentSettings.RunningCluster(targets.get(0), targets.get(1),
                    ConnectOptions.defaults().withSecurity(security.security()), containers);
        } else if (!containers.isEmpty()) {
            throw new ParameterException(spec.commandLine(), "--containers goes with a running cluster's two addresses");
        }
        PageSection section = page == null ? null : new PageSection(page, "experiment " + name);
        if (section != null) {
            section.check(); // before the run, not after minutes of it
        }
        long runSeed = seed == null ? System.nanoTime() : seed;
        printer.printf("experiment %s, seed %d (repeat with --seed)%s%n", name, runSeed, reduced ? ", reduced size" : "");
        printer.flush();
        long started = System.nanoTime();
        ExperimentResult result = experiment.run(new ExperimentSettings(runSeed, reduced, cluster), printer);
        ExperimentReport.write(experiment, result, out, printer);
        long seconds = Math.round((System.nanoTime() - started) / 1e9);
        printer.printf("%s took %d s%n", name, seconds);
        if (section != null) {
            section.write(pageBlock(experiment, result, runSeed, seconds));
            printer.println("wrote the results into " + page);
        }
        printer.flush();
        return result.allReproduced() ? 0 : 1;
    }

    /** What the page shows of the run: how to repeat it, where it ran, the plot, the table, the claims. */
    private String pageBlock(Experiment experiment, ExperimentResult result, long runSeed, long seconds) {
        Path pageDirectory = page.toAbsolutePath().getParent();
        String png = pageDirectory.relativize(out.toAbsolutePath().resolve(name + ".png")).toString();
        String command = "experiment " + name + " --seed " + runSeed + (reduced ? " --reduced" : "")
                + (targets.isEmpty() ? "" : " " + String.join(" ", targets));
        StringBuilder block = new StringBuilder();
        block.append(String.format("`%s`, at commit %s on %s, %d s:%n%n", command, Provenance.commit(out, page), Provenance.machine(), seconds));
        block.append(String.format("![%s](%s)%n%n", result.plot().title(), png)); // the title names the experiment
        block.append(ExperimentReport.table(result)).append('\n');
        for (Claim claim : result.claims()) {
            block.append("- ").append(claim.line()).append('\n');
        }
        return block.toString();
    }
}
