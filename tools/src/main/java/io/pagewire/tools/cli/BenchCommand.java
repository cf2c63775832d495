package io.pagewire.tools.cli;

import io.pagewire.tools.perf.Bench;
import io.pagewire.tools.perf.BenchReport;
import io.pagewire.tools.perf.Middleware;
import io.pagewire.tools.perf.Ucx;
import io.pagewire.tools.perf.VerbsPerftest;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code pagewire bench}: the data path against the link under it, interleaved rounds, one table and one plot. */
@Command(name = "bench", mixinStandardHelpOptions = true,
        description = {"Measures Pagewire's data path beside the raw gRPC link under it (and UCX over TCP where",
            "ucx_perftest is installed: apt-get install ucx-utils), in interleaved rounds on node processes it starts on",
            "loopback (plaintext, and with mutual TLS) and an embedded pair; with --testbed, also on two nodes of a running",
            "testbed (deploy/testbed.sh bench runs the compose testbed's), each configuration against its own link.",
            "Writes bench.md (medians, ranges, ratios with their targets), bench.csv (every round), bench.png (each ratio",
            "against its target) and bench-round-trips.csv (every write round trip behind the round-trip figures, with its",
            "start time) to --out, and prints the table."})
final class BenchCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = "--rounds", description = "Rounds; every figure is taken once per round (default ${DEFAULT-VALUE}).", defaultValue = "3")
    int rounds;

    @Option(names = "--out", paramLabel = "DIR", description = "Where the table, the rounds and the plot go (default ${DEFAULT-VALUE}).",
            defaultValue = "bench-results")
    Path out;

    @Option(names = "--page", paramLabel = "FILE",
            description = "Also writes the benchmark page there (docs/benchmarks.md), linking the plot in --out.")
    Path page;

    @Option(names = {"-s", "--set"}, paramLabel = "NAME=VALUE",
            description = "A node setting for every node process the bench starts, e.g. --set pagewire.fabric.onReadyThresholdBytes=256KiB.")
    Map<String, String> settings = new LinkedHashMap<>();

    @Option(names = "--testbed", paramLabel = "HOST:PORT,HOST:PORT", split = ",",
            description = "Two nodes of a running testbed (the requester's first) to measure beside the host processes, reached with"
                    + " --certs/--plaintext/--token as any application reaches them.")
    List<String> testbed = new ArrayList<>();

    @Option(names = "--testbed-containers", paramLabel = "NAME,NAME", split = ",",
            description = "The containers of the two testbed nodes (the requester's first): unmodified verbs programs (ib_write_bw,"
                    + " ib_write_lat) run in them through the image's library, beside the same between the host processes.")
    List<String> testbedContainers = new ArrayList<>();

    @Mixin
    ClientSecurityOptions testbedSecurity = new ClientSecurityOptions();

    @Option(names = "--quick", description = "Short runs (seconds, not minutes): to check the command, not to quote figures.")
    boolean quick;

    @Option(names = "--no-ucx", description = "Skip UCX even when ucx_perftest is installed.")
    boolean noUcx;

    @Option(names = "--no-verbs", description = "Skip perftest through the verbs library even when both are installed.")
    boolean noVerbs;

    @Override
    public Integer call() throws Exception {
        PrintWriter stdout = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (rounds < 1) {
            err.println("pagewire bench: --rounds must be at least 1");
            err.flush();
            return 2;
        }
        Files.createDirectories(out);
        Ucx ucx = noUcx ? Ucx.absent() : Ucx.find();
        VerbsPerftest verbs = noVerbs ? VerbsPerftest.absent() : VerbsPerftest.find();
        // No date: the page says what the latest run measured; when it ran is its commit's business.
        String header = String.format("## pagewire bench%n%nCommit %s. Machine: %s. %d round(s), interleaved; %s. %s",
                Provenance.commit(out, page == null ? out : page), Provenance.machine(), rounds,
                quick ? "quick runs (not for quoting)" : "20 s of traffic through each node pair and an unrecorded round 0 first, then bandwidth 3 s per figure"
                        + " (after 1 s of warm-up), latency 3,000 round trips (after 1,000, and after batches of 1,000 until this"
                        + " process's JIT compilers are quiet, at most 20)",
                (ucx.available() ? "UCX: ucx_perftest over TCP on loopback." : "UCX: not measured (ucx_perftest not installed).") + " "
                        + verbs.describe() + (verbs.available() ? " " + Middleware.find().describe() : ""))
                + (settings.isEmpty() ? " Node processes: default settings." : " Node processes: " + settings + ".")
                + (testbed.isEmpty() ? " Testbed: not measured (no --testbed; deploy/testbed.sh bench measures the compose testbed's)."
                        : " Testbed: the nodes at " + String.join(" and ", testbed) + ", reached from this host"
                        + (testbedContainers.isEmpty() ? "." : "; verbs programs run in their containers."));
        if (!testbed.isEmpty() && testbed.size() != 2) {
            err.println("pagewire bench: --testbed takes two nodes, HOST:PORT,HOST:PORT (the requester's first), not " + testbed);
            err.flush();
            return 2;
        }
        if (!testbedContainers.isEmpty() && (testbedContainers.size() != 2 || testbed.isEmpty())) {
            err.println("pagewire bench: --testbed-containers takes the two testbed nodes' containers, NAME,NAME, with --testbed, not "
                    + testbedContainers);
            err.flush();
            return 2;
        }
        Bench.SecuredPair testbedPair = testbed.isEmpty() ? null
                : new Bench.SecuredPair(Bench.TESTBED, testbed.get(0), testbed.get(1), testbedSecurity.security(), List.copyOf(testbedContainers));
        Bench bench = new Bench(PagewireCommand.class, quick ? Bench.Budget.quick() : Bench.Budget.full(), err, out, ucx, settings, testbedPair)
                .verbs(verbs);
        bench.run(rounds);
        BenchReport report = new BenchReport(bench.figures, header, bench.breakdown);
        String markdown = report.markdown();
        Files.writeString(out.resolve("bench.md"), markdown, StandardCharsets.UTF_8);
        Files.writeString(out.resolve("bench.csv"), report.csv(), StandardCharsets.UTF_8);
        report.plot(out.resolve("bench.png"));
        try (Writer w = Files.newBufferedWriter(out.resolve("bench-round-trips.csv"), StandardCharsets.UTF_8)) {
            bench.writeRoundTrips(w);
        }
        if (page != null) {
            Path pageDirectory = page.toAbsolutePath().getParent();
            Files.createDirectories(pageDirectory);
            String png = pageDirectory.relativize(out.resolve("bench.png").toAbsolutePath()).toString();
            Files.writeString(page, report.page(png), StandardCharsets.UTF_8);
        }
        stdout.println(markdown);
        stdout.println("wrote " + out.resolve("bench.md") + ", " + out.resolve("bench.csv") + ", " + out.resolve("bench.png") + ", "
                + out.resolve("bench-round-trips.csv"));
        stdout.flush();
        return 0;
    }
}
