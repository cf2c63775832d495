package io.pagewire.node;

import io.pagewire.kernel.KernelConfiguration;
import io.pagewire.kernel.PageReplacement;
import io.pagewire.kernel.StorageModel;
import io.pagewire.node.fabric.FabricConfiguration;
import io.pagewire.node.fabric.FabricContext;
import io.pagewire.node.nic.NicConfiguration;
import io.pagewire.node.nic.TlbIndexing;
import io.pagewire.node.nic.TlbReplacement;
import io.pagewire.node.security.SecurityContext;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.function.BiConsumer;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Every setting of a node by its property name, and how it lands in a {@link NodeContext}. Settings
 * come from a properties file, the environment ({@code PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES} for
 * {@code pagewire.kernel.physicalMemoryBytes}) and the command line, later sources overriding
 * earlier ones. Sizes may carry units ({@code 256MiB}), times too ({@code 200ms}).
 */
public final class NodeSettings {
    public static final String NODE_ID = "pagewire.node.id";
    public static final String NODE_HOST = "pagewire.node.host";
    public static final String NODE_PORT = "pagewire.node.port";
    public static final String NODE_PEERS = "pagewire.node.peers";
    public static final String NODE_METRICS_PORT = "pagewire.node.metricsPort";
    public static final String NODE_SHUTDOWN_GRACE = "pagewire.node.shutdownGraceNs";
    public static final String NODE_EVENT_LOOP_THREADS = "pagewire.node.eventLoopThreads";
    public static final String NODE_BUSY_POLL = "pagewire.node.busyPollNs";
    public static final String NODE_RING_DIRECTORY = "pagewire.node.ringDirectory";
    public static final String NODE_RING_BYTES = "pagewire.node.ringBytes";
    public static final String NODE_ACCEPT_PEERS = "pagewire.node.acceptPeers";
    public static final String QUOTA_SESSIONS = "pagewire.quota.sessions";
    public static final String QUOTA_VIRTUAL_BYTES_PER_SESSION = "pagewire.quota.virtualBytesPerSession";
    public static final String QUOTA_CONTROL_OPS_PER_SECOND = "pagewire.quota.controlOpsPerSecond";
    public static final String QUOTA_CONTROL_BURST = "pagewire.quota.controlBurst";
    /**
     * Variables of the SDK and the command's client side that share the {@code PAGEWIRE_} prefix: a
     * node ignores them (a container's health probe reads the same environment as its node).
     */
    public static final java.util.Set<String> CLIENT_VARIABLES = java.util.Set.of("PAGEWIRE_JAVA_OPTS", "PAGEWIRE_SECURITY_IDENTITY",
            "PAGEWIRE_SECURITY_SERVER_NAME");

    private static final Map<String, BiConsumer<NodeContext, String>> KNOBS = new TreeMap<>();
    private static final Pattern SIZE = Pattern.compile("(?i)\\s*(\\d+)\\s*(b|k|kb|kib|m|mb|mib|g|gb|gib)?\\s*");
    private static final Pattern TIME = Pattern.compile("(?i)\\s*(\\d+)\\s*(ns|us|µs|ms|s|m|min|h)?\\s*");

    static {
        knob(NODE_ID, (c, v) -> c.nodeId(v.trim()));
        knob(NODE_HOST, (c, v) -> c.host(v.trim()));
        knob(NODE_PORT, (c, v) -> c.port(integer(NODE_PORT, v)));
        knob(NODE_PEERS, (c, v) -> parsePeers(v).forEach(c::peer));
        knob(NODE_METRICS_PORT, (c, v) -> c.metricsPort(integer(NODE_METRICS_PORT, v)));
        knob(NODE_SHUTDOWN_GRACE, (c, v) -> c.shutdownGraceNs(nanos(NODE_SHUTDOWN_GRACE, v)));
        knob(NODE_EVENT_LOOP_THREADS, (c, v) -> c.eventLoopThreads(integer(NODE_EVENT_LOOP_THREADS, v)));
        knob(NODE_BUSY_POLL, (c, v) -> c.busyPollNs(nanos(NODE_BUSY_POLL, v)));
        knob(NODE_RING_DIRECTORY, (c, v) -> c.ringDirectory(v.trim()));
        knob(NODE_RING_BYTES, (c, v) -> c.ringBytes((int) bytes(NODE_RING_BYTES, v)));
        knob(NODE_ACCEPT_PEERS, (c, v) -> FabricContext.parsePeers(v).forEach(c::acceptPeer));
        knob(QUOTA_SESSIONS, (c, v) -> c.sessionsLimit(integer(QUOTA_SESSIONS, v)));
        knob(QUOTA_VIRTUAL_BYTES_PER_SESSION, (c, v) -> c.virtualBytesPerSession(bytes(QUOTA_VIRTUAL_BYTES_PER_SESSION, v)));
        knob(QUOTA_CONTROL_OPS_PER_SECOND, (c, v) -> c.controlOpsPerSecond(decimal(QUOTA_CONTROL_OPS_PER_SECOND, v)));
        knob(QUOTA_CONTROL_BURST, (c, v) -> c.controlBurst(integer(QUOTA_CONTROL_BURST, v)));
        knob(NicConfiguration.QUEUE_PAIRS_PER_SESSION_PROP_NAME, (c, v) -> c.nic().queuePairsPerSession(integer(NicConfiguration.QUEUE_PAIRS_PER_SESSION_PROP_NAME, v)));
        knob(NicConfiguration.WORK_REQUESTS_PER_SESSION_PROP_NAME, (c, v) -> c.nic().workRequestsPerSession(integer(NicConfiguration.WORK_REQUESTS_PER_SESSION_PROP_NAME, v)));
        knob(NicConfiguration.WORK_REQUESTS_PER_NODE_PROP_NAME, (c, v) -> c.nic().workRequestsPerNode(integer(NicConfiguration.WORK_REQUESTS_PER_NODE_PROP_NAME, v)));
        knob(NicConfiguration.REGIONS_PER_SESSION_PROP_NAME, (c, v) -> c.nic().regionsPerSession(integer(NicConfiguration.REGIONS_PER_SESSION_PROP_NAME, v)));
        knob(NicConfiguration.REGISTERED_BYTES_PER_SESSION_PROP_NAME, (c, v) -> c.nic().registeredBytesPerSession(bytes(NicConfiguration.REGISTERED_BYTES_PER_SESSION_PROP_NAME, v)));
        knob(NicConfiguration.SEND_BYTES_PER_SECOND_PER_SESSION_PROP_NAME,
                (c, v) -> c.nic().sendBytesPerSecondPerSession(bytes(NicConfiguration.SEND_BYTES_PER_SECOND_PER_SESSION_PROP_NAME, v)));
        knob(NicConfiguration.SEND_BURST_BYTES_PER_SESSION_PROP_NAME,
                (c, v) -> c.nic().sendBurstBytesPerSession(bytes(NicConfiguration.SEND_BURST_BYTES_PER_SESSION_PROP_NAME, v)));
        knob(NicConfiguration.COUNTERS_PER_SESSION_PROP_NAME, (c, v) -> c.nic().countersPerSession(integer(NicConfiguration.COUNTERS_PER_SESSION_PROP_NAME, v)));

        knob(SecurityContext.TRANSPORT_PROP_NAME, (c, v) -> c.security().transport(SecurityContext.TransportSecurity.parse(SecurityContext.TRANSPORT_PROP_NAME, v)));
        knob(SecurityContext.CERTIFICATE_DIRECTORY_PROP_NAME, (c, v) -> c.security().certificateDirectory(path(v)));
        knob(SecurityContext.CERTIFICATE_FILE_PROP_NAME, (c, v) -> c.security().certificateFile(path(v)));
        knob(SecurityContext.PRIVATE_KEY_FILE_PROP_NAME, (c, v) -> c.security().privateKeyFile(path(v)));
        knob(SecurityContext.TRUSTED_CA_FILE_PROP_NAME, (c, v) -> c.security().trustedCaFile(path(v)));
        knob(SecurityContext.APPLICATION_TOKEN_PROP_NAME, (c, v) -> c.security().applicationToken(v.trim()));
        knob(SecurityContext.METRICS_TOKEN_PROP_NAME, (c, v) -> c.security().metricsToken(v.trim()));
        knob(SecurityContext.METRICS_TOKEN_FILE_PROP_NAME, (c, v) -> c.security().metricsTokenFile(path(v)));

        knob(KernelConfiguration.PAGE_SIZE_PROP_NAME, (c, v) -> c.kernel().pageSizeBytes((int) bytes(KernelConfiguration.PAGE_SIZE_PROP_NAME, v)));
        knob(KernelConfiguration.PHYSICAL_MEMORY_PROP_NAME, (c, v) -> c.kernel().physicalMemoryBytes(bytes(KernelConfiguration.PHYSICAL_MEMORY_PROP_NAME, v)));
        knob(KernelConfiguration.SWAP_SIZE_PROP_NAME, (c, v) -> c.kernel().swapBytes(bytes(KernelConfiguration.SWAP_SIZE_PROP_NAME, v)));
        knob(KernelConfiguration.SWAP_FILE_PROP_NAME, (c, v) -> c.kernel().swapFile(v.isBlank() ? null : Path.of(v.trim())));
        knob(KernelConfiguration.MEMLOCK_LIMIT_PROP_NAME, (c, v) -> c.kernel().memlockLimitBytes(bytes(KernelConfiguration.MEMLOCK_LIMIT_PROP_NAME, v)));
        knob(KernelConfiguration.NODE_PIN_LIMIT_PROP_NAME, (c, v) -> c.kernel().nodePinLimitBytes(bytes(KernelConfiguration.NODE_PIN_LIMIT_PROP_NAME, v)));
        knob(KernelConfiguration.SYSTEM_BUFFER_SIZE_PROP_NAME, (c, v) -> c.kernel().systemBufferBytes(bytes(KernelConfiguration.SYSTEM_BUFFER_SIZE_PROP_NAME, v)));
        knob(KernelConfiguration.PAGE_REPLACEMENT_PROP_NAME, (c, v) -> c.kernel().pageReplacement(PageReplacement.parse(KernelConfiguration.PAGE_REPLACEMENT_PROP_NAME, v)));
        knob(KernelConfiguration.DMA_DRAIN_TIMEOUT_PROP_NAME, (c, v) -> c.kernel().dmaDrainTimeoutNs(nanos(KernelConfiguration.DMA_DRAIN_TIMEOUT_PROP_NAME, v)));
        knob(KernelConfiguration.SWAP_DEVICE_PROP_NAME, (c, v) -> c.kernel().swapDevice(StorageModel.preset(KernelConfiguration.SWAP_DEVICE_PROP_NAME, v)));
        knob(KernelConfiguration.SWAP_READ_LATENCY_PROP_NAME, (c, v) -> c.kernel().swapReadLatencyNs(nanos(KernelConfiguration.SWAP_READ_LATENCY_PROP_NAME, v)));
        knob(KernelConfiguration.SWAP_WRITE_LATENCY_PROP_NAME, (c, v) -> c.kernel().swapWriteLatencyNs(nanos(KernelConfiguration.SWAP_WRITE_LATENCY_PROP_NAME, v)));
        knob(KernelConfiguration.SWAP_BANDWIDTH_PROP_NAME, (c, v) -> c.kernel().swapBytesPerSecond(bytes(KernelConfiguration.SWAP_BANDWIDTH_PROP_NAME, v)));
        knob(KernelConfiguration.SWAP_QUEUE_DEPTH_PROP_NAME, (c, v) -> c.kernel().swapQueueDepth(integer(KernelConfiguration.SWAP_QUEUE_DEPTH_PROP_NAME, v)));
        knob(KernelConfiguration.FAULT_OVERHEAD_PROP_NAME, (c, v) -> c.kernel().faultOverheadNs(nanos(KernelConfiguration.FAULT_OVERHEAD_PROP_NAME, v)));
        knob(KernelConfiguration.PIN_COST_PROP_NAME, (c, v) -> c.kernel().pinCostNs(nanos(KernelConfiguration.PIN_COST_PROP_NAME, v)));
        knob(KernelConfiguration.FAULT_HANDLERS_PROP_NAME, (c, v) -> c.kernel().faultHandlers(integer(KernelConfiguration.FAULT_HANDLERS_PROP_NAME, v)));

        knob(NicConfiguration.TLB_ENTRIES_PROP_NAME, (c, v) -> c.nic().tlbEntries(integer(NicConfiguration.TLB_ENTRIES_PROP_NAME, v)));
        knob(NicConfiguration.TLB_WAYS_PROP_NAME, (c, v) -> c.nic().tlbWays(integer(NicConfiguration.TLB_WAYS_PROP_NAME, v)));
        knob(NicConfiguration.TLB_REPLACEMENT_PROP_NAME, (c, v) -> c.nic().tlbReplacement(TlbReplacement.parse(NicConfiguration.TLB_REPLACEMENT_PROP_NAME, v)));
        knob(NicConfiguration.TLB_INDEXING_PROP_NAME, (c, v) -> c.nic().tlbIndexing(TlbIndexing.parse(NicConfiguration.TLB_INDEXING_PROP_NAME, v)));
        knob(NicConfiguration.RANDOM_SEED_PROP_NAME, (c, v) -> c.nic().randomSeed(wholeNumber(NicConfiguration.RANDOM_SEED_PROP_NAME, v)));
        knob(NicConfiguration.MTU_PROP_NAME, (c, v) -> c.nic().mtuBytes((int) bytes(NicConfiguration.MTU_PROP_NAME, v)));
        knob(NicConfiguration.SEND_WINDOW_PROP_NAME, (c, v) -> c.nic().sendWindowPackets(integer(NicConfiguration.SEND_WINDOW_PROP_NAME, v)));
        knob(NicConfiguration.BATCH_PROP_NAME, (c, v) -> c.nic().batchPackets(integer(NicConfiguration.BATCH_PROP_NAME, v)));
        knob(NicConfiguration.READ_REQUEST_PACKETS_PROP_NAME, (c, v) -> c.nic().readRequestPackets(integer(NicConfiguration.READ_REQUEST_PACKETS_PROP_NAME, v)));
        knob(NicConfiguration.ACK_TIMEOUT_PROP_NAME, (c, v) -> c.nic().ackTimeoutNs(nanos(NicConfiguration.ACK_TIMEOUT_PROP_NAME, v)));
        knob(NicConfiguration.RETRY_COUNT_PROP_NAME, (c, v) -> c.nic().retryCount(integer(NicConfiguration.RETRY_COUNT_PROP_NAME, v)));
        knob(NicConfiguration.RNR_DELAY_PROP_NAME, (c, v) -> c.nic().rnrDelayNs(nanos(NicConfiguration.RNR_DELAY_PROP_NAME, v)));
        knob(NicConfiguration.RNR_RETRY_COUNT_PROP_NAME, (c, v) -> c.nic().rnrRetryCount(integer(NicConfiguration.RNR_RETRY_COUNT_PROP_NAME, v)));
        knob(NicConfiguration.REORDER_WINDOW_PROP_NAME, (c, v) -> c.nic().reorderWindowPackets(integer(NicConfiguration.REORDER_WINDOW_PROP_NAME, v)));
        knob(NicConfiguration.CREDITS_PER_QP_PROP_NAME, (c, v) -> c.nic().creditsPerQp(integer(NicConfiguration.CREDITS_PER_QP_PROP_NAME, v)));
        knob(NicConfiguration.CQ_CAPACITY_PROP_NAME, (c, v) -> c.nic().cqCapacity(integer(NicConfiguration.CQ_CAPACITY_PROP_NAME, v)));
        knob(NicConfiguration.MAX_MESSAGE_PROP_NAME, (c, v) -> c.nic().maxMessageBytes((int) bytes(NicConfiguration.MAX_MESSAGE_PROP_NAME, v)));

        knob(FabricConfiguration.LANES_PER_PEER_PROP_NAME, (c, v) -> c.fabric().lanesPerPeer(integer(FabricConfiguration.LANES_PER_PEER_PROP_NAME, v)));
        knob(FabricConfiguration.RECONNECT_MIN_PROP_NAME, (c, v) -> c.fabric().reconnectBackoffMinNs(nanos(FabricConfiguration.RECONNECT_MIN_PROP_NAME, v)));
        knob(FabricConfiguration.RECONNECT_MAX_PROP_NAME, (c, v) -> c.fabric().reconnectBackoffMaxNs(nanos(FabricConfiguration.RECONNECT_MAX_PROP_NAME, v)));
        knob(FabricConfiguration.ON_READY_THRESHOLD_PROP_NAME, (c, v) -> c.fabric().onReadyThresholdBytes((int) bytes(FabricConfiguration.ON_READY_THRESHOLD_PROP_NAME, v)));
        knob(FabricConfiguration.FLOW_CONTROL_WINDOW_PROP_NAME, (c, v) -> c.fabric().flowControlWindowBytes((int) bytes(FabricConfiguration.FLOW_CONTROL_WINDOW_PROP_NAME, v)));
        knob(FabricConfiguration.MAX_MESSAGE_PROP_NAME, (c, v) -> c.fabric().maxMessageBytes((int) bytes(FabricConfiguration.MAX_MESSAGE_PROP_NAME, v)));
        knob(FabricConfiguration.LOSS_RATE_PROP_NAME, (c, v) -> c.fabric().lossRate(rate(FabricConfiguration.LOSS_RATE_PROP_NAME, v)));
        knob(FabricConfiguration.DUPLICATE_RATE_PROP_NAME, (c, v) -> c.fabric().duplicateRate(rate(FabricConfiguration.DUPLICATE_RATE_PROP_NAME, v)));
        knob(FabricConfiguration.REORDER_RATE_PROP_NAME, (c, v) -> c.fabric().reorderRate(rate(FabricConfiguration.REORDER_RATE_PROP_NAME, v)));
        knob(FabricConfiguration.DELAY_PROP_NAME, (c, v) -> c.fabric().delayNs(nanos(FabricConfiguration.DELAY_PROP_NAME, v)));
        knob(FabricConfiguration.DELAY_JITTER_PROP_NAME, (c, v) -> c.fabric().delayJitterNs(nanos(FabricConfiguration.DELAY_JITTER_PROP_NAME, v)));
        knob(FabricConfiguration.CUT_LINKS_PROP_NAME, (c, v) -> c.fabric().cutLinks(FabricContext.parsePeers(v)));
        knob(FabricConfiguration.FAULT_SEED_PROP_NAME, (c, v) -> c.fabric().faultSeed(integer(FabricConfiguration.FAULT_SEED_PROP_NAME, v)));
    }

    private NodeSettings() {
    }

    private static void knob(String name, BiConsumer<NodeContext, String> apply) {
        KNOBS.put(name, apply);
    }

    /** Every setting's property name. */
    public static java.util.Set<String> names() {
        return KNOBS.keySet();
    }

    /** The environment variable for a property: {@code pagewire.kernel.physicalMemoryBytes} is {@code PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES}. */
    public static String environmentName(String property) {
        return property.replaceAll("([a-z0-9])([A-Z])", "$1_$2").replace('.', '_').toUpperCase(Locale.ROOT);
    }

    /** Settings found in the environment, by property name; an unknown {@code PAGEWIRE_} variable is an error. */
    public static Map<String, String> fromEnvironment(Map<String, String> environment) {
        Map<String, String> byEnvironmentName = new TreeMap<>();
        for (String name : KNOBS.keySet()) {
            byEnvironmentName.put(environmentName(name), name);
        }
        Map<String, String> settings = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : new TreeMap<>(environment).entrySet()) {
            if (!e.getKey().startsWith("PAGEWIRE_") || CLIENT_VARIABLES.contains(e.getKey())) {
                continue;
            }
            String property = byEnvironmentName.get(e.getKey());
            if (property == null) {
                throw new IllegalArgumentException("unknown setting in the environment: " + e.getKey()
                        + "; settings are the PAGEWIRE_ forms of " + KNOBS.keySet());
            }
            settings.put(property, e.getValue());
        }
        return settings;
    }

    /** Settings from a properties file. */
    public static Map<String, String> fromFile(Path file) {
        Properties properties = new Properties();
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            properties.load(reader);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read configuration file " + file + ": " + e.getMessage());
        }
        Map<String, String> settings = new LinkedHashMap<>();
        for (String name : new TreeMap<>(properties).keySet().stream().map(Object::toString).toList()) {
            settings.put(name, properties.getProperty(name));
        }
        return settings;
    }

    /** Applies settings to a context; an unknown name or an unparsable value is an error naming it. */
    public static void apply(NodeContext context, Map<String, String> settings, String source) {
        for (Map.Entry<String, String> setting : settings.entrySet()) {
            BiConsumer<NodeContext, String> apply = KNOBS.get(setting.getKey());
            if (apply == null) {
                throw new IllegalArgumentException("unknown setting " + setting.getKey() + " (from " + source + "); known settings: " + KNOBS.keySet());
            }
            apply.accept(context, setting.getValue());
        }
    }

    /** Parses "node-2=host:port,node-3=host:port". */
    public static Map<String, String> parsePeers(String value) {
        Map<String, String> peers = new LinkedHashMap<>();
        for (String part : value.split(",")) {
            if (part.isBlank()) {
                continue;
            }
            int eq = part.indexOf('=');
            if (eq <= 0 || eq == part.length() - 1) {
                throw new IllegalArgumentException(NODE_PEERS + " must be id=host:port[,id=host:port...], was '" + value + "'");
            }
            peers.put(part.substring(0, eq).trim(), part.substring(eq + 1).trim());
        }
        return peers;
    }

    /** A byte count, with an optional unit: 4096, 64KiB, 256MiB, 1G. */
    public static long bytes(String knob, String value) {
        Matcher m = SIZE.matcher(value);
        if (!m.matches()) {
            throw new IllegalArgumentException(knob + " must be a size such as 4096, 64KiB or 256MiB, was '" + value + "'");
        }
        long n = Long.parseLong(m.group(1));
        String unit = m.group(2) == null ? "b" : m.group(2).toLowerCase(Locale.ROOT);
        return switch (unit.charAt(0)) {
            case 'k' -> n << 10;
            case 'm' -> n << 20;
            case 'g' -> n << 30;
            default -> n;
        };
    }

    /** A duration in nanoseconds, with an optional unit: 200000, 200us, 200ms, 2s, 30m, 1h. */
    public static long nanos(String knob, String value) {
        Matcher m = TIME.matcher(value);
        if (!m.matches()) {
            throw new IllegalArgumentException(knob + " must be a duration such as 200ms, 50us, 2s or 30m (plain numbers are ns), was '" + value + "'");
        }
        long n = Long.parseLong(m.group(1));
        String unit = m.group(2) == null ? "ns" : m.group(2).toLowerCase(Locale.ROOT);
        return switch (unit) {
            case "us", "µs" -> n * 1_000L;
            case "ms" -> n * 1_000_000L;
            case "s" -> n * 1_000_000_000L;
            case "m", "min" -> n * 60_000_000_000L;
            case "h" -> n * 3_600_000_000_000L;
            default -> n;
        };
    }

    private static Path path(String value) {
        return value.isBlank() ? null : Path.of(value.trim());
    }

    private static long wholeNumber(String knob, String value) {
        try {
            return Long.parseLong(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(knob + " must be a whole number, was '" + value + "'");
        }
    }

    private static int integer(String knob, String value) {
        try {
            return Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(knob + " must be a whole number, was '" + value + "'");
        }
    }

    private static double decimal(String knob, String value) {
        try {
            return Double.parseDouble(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(knob + " must be a number such as 500, was '" + value + "'");
        }
    }

    private static double rate(String knob, String value) {
        try {
            return Double.parseDouble(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(knob + " must be a probability such as 0.05, was '" + value + "'");
        }
    }
}
