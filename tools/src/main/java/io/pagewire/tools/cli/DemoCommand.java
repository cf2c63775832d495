package io.pagewire.tools.cli;

import io.pagewire.client.Pagewire;
import io.pagewire.client.RegistrationMode;
import io.pagewire.config.SettingType;
import io.pagewire.kernel.ByteSizes;
import io.pagewire.node.NodeSettings;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code pagewire demo}: the four registration modes side by side on one overcommitted workload. */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = {"Starts a cluster in this JVM over loopback gRPC and runs the same overcommitted workload (each node's",
            "region several times its physical memory, written by the previous node in a ring) under each registration",
            "mode, then prints their figures side by side, read from the nodes' meters."})
final class DemoCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = "--nodes", description = "Nodes in the ring.", defaultValue = "3")
    int nodes;

    @Option(names = "--memory", paramLabel = "SIZE", description = "Physical memory of each node.", defaultValue = "8MiB")
    String memory;

    @Option(names = "--overcommit", description = "Working set per node, in multiples of its physical memory.", defaultValue = "4")
    int overcommit;

    @Option(names = "--message", paramLabel = "SIZE", description = "Size of each write.", defaultValue = "64KiB")
    String message;

    @Option(names = "--depth", description = "Writes in flight per writer.", defaultValue = "8")
    int depth;

    @Option(names = "--memlock", paramLabel = "SIZE", description = "Pinned memory an endpoint may hold.", defaultValue = "8MiB")
    String memlock;

    @Option(names = "--tlb-entries", description = "TLB entries of each NIC.", defaultValue = "256")
    int tlbEntries;

    @Option(names = "--modes", split = ",", description = "Modes to run: ${COMPLETION-CANDIDATES}.",
            defaultValue = "PINNED,PIN_ON_MISS,SHADOW,ON_DEMAND")
    List<RegistrationMode> modes;

    @Option(names = "--page", paramLabel = "FILE",
            description = "A markdown page whose block '<!-- generated: demo -->' ... '<!-- end generated: demo -->' this run rewrites with"
                    + " its table, the commit and the machine (the README's).")
    Path page;

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        PageSection section = page == null ? null : new PageSection(page, "demo");
        if (section != null) {
            section.check();
        }
        long memoryBytes = SettingType.bytes("--memory", memory);
        int messageBytes = (int) SettingType.bytes("--message", message);
        long memlockBytes = SettingType.bytes("--memlock", memlock);
        long workingSet = memoryBytes * overcommit / messageBytes * messageBytes;
        out.printf("Pagewire demo: %d nodes in one JVM over loopback gRPC; each has %s of memory and %s of swap, memlock %s, a %d-entry TLB.%n",
                nodes, ByteSizes.format(memoryBytes), ByteSizes.format(8 * workingSet), ByteSizes.format(memlockBytes), tlbEntries);
        out.printf("Workload: each node writes a region of %s (%dx a node's memory) on the next node, twice over, in %s writes, %d in flight.%n",
                ByteSizes.format(workingSet), overcommit, ByteSizes.format(messageBytes), depth);
        out.flush();
        long started = System.nanoTime();
        try (EmbeddedCluster cluster = EmbeddedCluster.start(nodes, Transport.NETTY, c -> {
            c.metricsPort(0);
            c.kernel().physicalMemoryBytes(memoryBytes).swapBytes(8 * workingSet).memlockLimitBytes(memlockBytes)
                    .systemBufferBytes(2L << 20);
            c.nic().tlbEntries(tlbEntries).tlbWays(Math.min(8, tlbEntries));
        })) {
            out.printf("The nodes listen on loopback only and talk mutual TLS, with a CA made for this run in %s.%n", cluster.certificates());
            out.println("While it runs, each node's meters are at:");
            for (PagewireNode node : cluster.nodes()) {
                out.printf("  %s  %s   (or: pagewire stat --certs %s %s)%n", node.id(), node.metricsUrl(), cluster.certificates(), node.target());
            }
            out.flush();
            List<Pagewire> connections = new ArrayList<>();
            try {
                for (PagewireNode node : cluster.nodes()) {
                    connections.add(Pagewire.connect(node.target(), cluster.connectOptions()));
                }
                Demo demo = new Demo(connections, new Demo.Workload(workingSet, messageBytes, depth));
                List<Demo.Row> rows = new ArrayList<>();
                for (RegistrationMode mode : modes) {
                    out.printf("running %s ...%n", mode);
                    out.flush();
                    rows.add(demo.run(mode));
                }
                out.println();
                print(out, rows);
                if (section != null) {
                    StringWriter table = new StringWriter();
                    print(new PrintWriter(table), rows);
                    section.write(String.format("On %s, at commit %s (`pagewire demo`, %.0f s):%n%n```%n%s```%n", Provenance.machine(),
                            Provenance.commit(page), (System.nanoTime() - started) / 1e9, table));
                    out.println("wrote the table into " + page);
                }
            } finally {
                connections.forEach(Pagewire::close);
            }
        }
        out.printf("%nDone in %.1f s. Throughput counts every writer; p50 is the writers' mean, p99 the worst writer's.%n",
                (System.nanoTime() - started) / 1e9);
        out.println("Faults are the kernel's NIC page faults (minor: no I/O; major: read from swap). TLB hit dst/src: the hit rate of the");
        out.println("TLB (PIN_ON_MISS and ON_DEMAND only) on the pages written to and the pages sent from, first transmissions only.");
        out.flush();
        return 0;
    }

    static void print(PrintWriter out, List<Demo.Row> rows) {
        out.printf("%-12s %9s %9s %10s %15s %17s %9s %11s %12s %12s%n", "mode", "MB/s", "p50 us", "p99 us", "TLB hit dst/src",
                "faults min/maj", "RNR NAKs", "parked MiB", "credit waits", "peak pinned");
        for (Demo.Row r : rows) {
            if (r.error() != null) {
                out.printf("%-12s %s%n", r.mode(), "registration refused: " + r.error());
                continue;
            }
            out.printf(Locale.ROOT, "%-12s %9.1f %9.0f %10.0f %15s %17s %9d %11.1f %12d %9.1f MiB%n", r.mode(), r.mbPerSec(), r.p50Us(),
                    r.p99Us(), percent(r.destinationHitRate()) + "/" + percent(r.sourceHitRate()),
                    r.minorFaults() + "/" + r.majorFaults(), r.rnrNaks(), r.parkedMiB(), r.creditWaits(), r.peakPinnedMiB());
        }
        out.flush();
    }

    private static String percent(double rate) {
        return Double.isNaN(rate) ? "-" : String.format(Locale.ROOT, "%.1f%%", 100 * rate);
    }
}
