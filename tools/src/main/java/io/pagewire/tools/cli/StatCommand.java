package io.pagewire.tools.cli;

import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.client.RegionStats;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/** {@code pagewire stat}: a node's counters as a table, refreshed, like AeronStat. */
@Command(name = "stat", mixinStandardHelpOptions = true,
        description = {"Shows nodes' meters (the ones Prometheus scrapes) as a table, refreshed every interval.",
            "Counters also show their rate per second since the last refresh."})
final class StatCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(arity = "0..*", paramLabel = "HOST:PORT", description = "Nodes to watch (default localhost:7100).")
    List<String> targets = new ArrayList<>();

    @Option(names = {"-i", "--interval"}, paramLabel = "SECONDS", description = "Refresh interval.", defaultValue = "1")
    double interval;

    @Option(names = "--once", description = "Print once and exit.")
    boolean once;

    @Option(names = {"-f", "--filter"}, paramLabel = "REGEX", description = "Only meters whose name matches.")
    String filter;

    @Option(names = "--regions", description = "Show every registered memory region's counters instead of the meters (as rdma stat mr).")
    boolean regions;

    @Option(names = "--zeros", description = "Also show meters whose value is zero.")
    boolean zeros;

    @Mixin
    ClientSecurityOptions security = new ClientSecurityOptions();

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        if (targets.isEmpty()) {
            targets = List.of("localhost:7100");
        }
        Pattern pattern = filter == null ? null : Pattern.compile(filter);
        Map<String, Pagewire> connections = new LinkedHashMap<>();
        Map<String, Double> previous = new HashMap<>();
        long previousNs = 0;
        boolean terminal = System.console() != null && !once;
        try {
            for (String target : targets) {
                connections.put(target, Pagewire.connect(target, ConnectOptions.defaults().withSecurity(security.security())));
            }
            while (true) {
                long now = System.nanoTime();
                double seconds = previousNs == 0 ? 0 : (now - previousNs) / 1e9;
                StringBuilder screen = new StringBuilder();
                for (Map.Entry<String, Pagewire> connection : connections.entrySet()) {
                    if (regions) {
                        try {
                            screen.append(regionTable(connection.getKey(), connection.getValue().regionStats()));
                        } catch (RuntimeException e) {
                            screen.append("== ").append(connection.getKey()).append(": ").append(e.getMessage()).append('\n');
                        }
                        continue;
                    }
                    List<Pagewire.Stat> stats;
                    try {
                        stats = connection.getValue().statList();
                    } catch (RuntimeException e) {
                        screen.append("== ").append(connection.getKey()).append(": ").append(e.getMessage()).append('\n');
                        continue;
                    }
                    screen.append(String.format("== %s%n %-48s %-36s %16s %12s%n", connection.getKey(), "METER", "TAGS", "VALUE", "RATE/s"));
                    for (Pagewire.Stat stat : stats) {
                        if ((pattern != null && !pattern.matcher(stat.name()).find()) || (!zeros && stat.value() == 0)) {
                            continue;
                        }
                        String tags = stat.tags().entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
                                .collect(Collectors.joining(","));
                        String key = connection.getKey() + " " + stat.name() + "{" + tags + "}";
                        Double before = previous.put(key, stat.value());
                        String rate = stat.counter() && before != null && seconds > 0
                                ? String.format(Locale.ROOT, "%12.1f", (stat.value() - before) / seconds) : "";
                        screen.append(String.format(Locale.ROOT, " %-48s %-36s %16s %12s%n", stat.name(), tags, format(stat.value()), rate));
                    }
                }
                previousNs = now;
                out.print(terminal ? "\033[H\033[2J" + screen : screen);
                out.flush();
                if (once) {
                    return 0;
                }
                Thread.sleep((long) (interval * 1000));
            }
        } finally {
            connections.values().forEach(Pagewire::close);
        }
    }

    /** One line per region: where it is, its mode, and its counters. */
    static String regionTable(String target, List<RegionStats> regions) {
        StringBuilder out = new StringBuilder(String.format("== %s%n %8s %6s %18s %12s %-12s %8s %8s %8s %10s %8s %14s %14s%n", target, "ENDPOINT",
                "LKEY", "ADDRESS", "LENGTH", "MODE", "MINOR", "MAJOR", "INVAL", "PREFETCHED", "PINS", "BYTES IN", "BYTES OUT"));
        for (RegionStats r : regions) {
            out.append(String.format(Locale.ROOT, " %8d %6d %#18x %12d %-12s %8d %8d %8d %10d %8d %14d %14d%n", r.endpointId(), r.lkey(), r.address(),
                    r.length(), r.mode(), r.minorFaults(), r.majorFaults(), r.invalidations(), r.prefetchedPages(), r.pins(), r.bytesReceived(),
                    r.bytesSent()));
        }
        if (regions.isEmpty()) {
            out.append(" no region is registered\n");
        }
        return out.toString();
    }

    private static String format(double value) {
        return value == Math.rint(value) && Math.abs(value) < 1e15 ? String.format(Locale.ROOT, "%d", (long) value)
                : String.format(Locale.ROOT, "%.6g", value);
    }
}
