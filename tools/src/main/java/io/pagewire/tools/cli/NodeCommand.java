package io.pagewire.tools.cli;

import io.pagewire.config.Setting;
import io.pagewire.node.NodeConfiguration;
import io.pagewire.node.NodeContext;
import io.pagewire.node.NodeSettings;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code pagewire node}: runs one node until SIGTERM or Ctrl-C, then shuts down gracefully. */
@Command(name = "node", mixinStandardHelpOptions = true,
        description = {"Runs one Pagewire node until SIGTERM or Ctrl-C.",
            "Settings come from --config, then the environment (PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES for",
            "pagewire.kernel.physicalMemoryBytes), then --set, then the named options; later ones win.",
            "Sizes take units (256MiB), times too (200ms). --list-settings shows every setting."})
final class NodeCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = "--id", description = "This node's id (pagewire.node.id).")
    String id;

    @Option(names = "--host", description = "Address to listen on (pagewire.node.host).")
    String host;

    @Option(names = "--port", description = "gRPC port for peers and applications (pagewire.node.port).")
    Integer port;

    @Option(names = "--metrics-port", description = "Port of /metrics for Prometheus; -1 for none (pagewire.node.metricsPort).")
    Integer metricsPort;

    @Option(names = "--peer", paramLabel = "ID=HOST:PORT", description = "A peer to link to; repeatable (pagewire.node.peers).")
    List<String> peers = new ArrayList<>();

    @Option(names = "--memory", paramLabel = "SIZE", description = "Physical memory (pagewire.kernel.physicalMemoryBytes).")
    String memory;

    @Option(names = "--swap", paramLabel = "SIZE", description = "Swap size (pagewire.kernel.swapBytes).")
    String swap;

    @Option(names = "--memlock", paramLabel = "SIZE", description = "Pinned memory per endpoint (pagewire.kernel.memlockLimitBytes).")
    String memlock;

    @Option(names = "--tlb-entries", description = "NIC TLB entries (pagewire.nic.tlbEntries).")
    Integer tlbEntries;

    @Option(names = "--config", paramLabel = "FILE", description = "A properties file of settings.")
    Path config;

    @Option(names = {"-s", "--set"}, paramLabel = "NAME=VALUE", description = "Any setting, e.g. --set pagewire.fabric.lossRate=0.01.")
    Map<String, String> settings = new LinkedHashMap<>();

    @Option(names = "--list-settings", description = "Prints every setting with its environment variable, type, default and what it does, then exits.")
    boolean listSettings;

    @Option(names = "--settings-reference", description = "Prints the configuration reference (docs/configuration.md) as Markdown, then exits.")
    boolean settingsReference;

    private final Map<String, String> environment;

    NodeCommand(Map<String, String> environment) {
        this.environment = environment;
    }

    @Override
    public Integer call() throws Exception {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        if (settingsReference) {
            out.print(NodeSettings.referencePage());
            out.flush();
            return 0;
        }
        if (listSettings) {
            for (Setting<?> setting : NodeSettings.all()) {
                out.printf("%-46s %-50s %-10s %s%n    %s%n", setting.name(), setting.environmentName(), setting.type().name(),
                        setting.formattedDefault().isEmpty() ? "(none)" : setting.formattedDefault(), setting.doc());
            }
            out.flush();
            return 0;
        }
        NodeContext context = new NodeContext().transport(Transport.NETTY);
        try {
            if (config != null) {
                NodeSettings.apply(context, NodeSettings.fromFile(config), "file " + config);
            }
            NodeSettings.apply(context, NodeSettings.fromEnvironment(environment), "the environment");
            NodeSettings.apply(context, settings, "--set");
            NodeSettings.apply(context, named(), "the command line");
            context.conclude();
        } catch (IllegalArgumentException e) {
            err.println("pagewire node: invalid configuration: " + e.getMessage());
            err.flush();
            return 2;
        }
        PagewireNode node = PagewireNode.start(context);
        CountDownLatch stopped = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            out.println("node " + node.id() + ": shutting down (health NOT_SERVING, draining in-flight work)");
            out.flush();
            boolean drained = node.shutdownGracefully();
            out.println("node " + node.id() + ": stopped" + (drained ? "" : " (grace period ran out before everything drained)"));
            out.flush();
            stopped.countDown();
        }, "pagewire-shutdown");
        Runtime.getRuntime().addShutdownHook(hook);
        out.printf("node %s listening on %s; metrics at %s; peers %s; %s%n", node.id(), node.boundAddress(),
                node.metricsUrl() == null ? "(off)" : node.metricsBoundAddress(), context.peers(), node.security());
        out.flush();
        stopped.await();
        return 0;
    }

    private Map<String, String> named() {
        Map<String, String> named = new LinkedHashMap<>();
        put(named, NodeConfiguration.ID.name(), id);
        put(named, NodeConfiguration.HOST.name(), host);
        put(named, NodeConfiguration.PORT.name(), port);
        put(named, NodeConfiguration.METRICS_PORT.name(), metricsPort);
        if (!peers.isEmpty()) {
            named.put(NodeConfiguration.PEERS.name(), String.join(",", peers));
        }
        put(named, "pagewire.kernel.physicalMemoryBytes", memory);
        put(named, "pagewire.kernel.swapBytes", swap);
        put(named, "pagewire.kernel.memlockLimitBytes", memlock);
        put(named, "pagewire.nic.tlbEntries", tlbEntries);
        return named;
    }

    private static void put(Map<String, String> map, String name, Object value) {
        if (value != null) {
            map.put(name, value.toString());
        }
    }
}
