package io.pagewire.node;

import io.pagewire.config.Setting;
import io.pagewire.config.SettingType;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The knobs of a node as a whole (its identity, address, peers, event loops), each declared once:
 * name, type with unit, default, check and doc. The kernel agent, the NIC, the fabric, security and
 * the verbs service declare theirs in their own {@code *Configuration}; {@link NodeSettings} has all.
 */
public final class NodeConfiguration {
    public static final Setting<String> ID = Setting.text("pagewire.node.id", "node-1",
            "This node's id, which peers and queue-pair addresses name: 1 to 64 letters, digits, '.', '_' or '-'");
    public static final Setting<String> ADDRESS = Setting.text("pagewire.node.address", "",
            "The IP address this node answers to for the connection manager (rdma_cm), as a RoCE port answers to its interface's:"
                    + " programs bind and resolve it; empty takes the address the machine's host name resolves to (a container's own)."
                    + " Nodes that share a host need one each (127.0.1.1, 127.0.1.2, ...)");
    public static final Setting<String> HOST = Setting.text("pagewire.node.host", "0.0.0.0", "The address the node's gRPC port binds");
    public static final Setting<Integer> PORT = Setting.count("pagewire.node.port", 7100,
            "The gRPC port peers and applications reach the node on; 0 picks a free one").between(0, 65535);
    public static final Setting<Map<String, String>> PEERS = Setting.peers("pagewire.node.peers",
            "The nodes to link to, id=host:port, comma-separated; an entry naming this node is skipped, so one list serves every replica");
    public static final Setting<Set<String>> ACCEPT_PEERS = Setting.ids("pagewire.node.acceptPeers",
            "Nodes whose lanes this node accepts though it does not dial them, comma-separated");
    public static final Setting<Integer> METRICS_PORT = Setting.count("pagewire.node.metricsPort", 9464,
            "The port of /metrics for Prometheus; 0 picks a free one, -1 turns it off")
            .where(v -> v >= -1 && v <= 65535, "from 0 to 65535, or -1 for none");
    public static final Setting<Long> SHUTDOWN_GRACE = Setting.nanos("pagewire.node.shutdownGraceNs", 10_000_000_000L,
            "How long a graceful shutdown (SIGTERM) waits for in-flight work to drain").where(v -> v >= 0, "zero or positive");
    public static final Setting<Integer> EVENT_LOOP_THREADS = Setting.count("pagewire.node.eventLoopThreads", 1,
            "Threads of the node's Netty event loops (its server, lanes and ring readers), like one NIC engine by default").between(1, 64);
    public static final Setting<Long> BUSY_POLL = Setting.nanos("pagewire.node.busyPollNs", 0,
            "Latency mode: how long an idle event loop keeps polling before it blocks; 0 blocks at once")
            .where(v -> v >= 0 && v <= 1_000_000_000L, "from 0 to 1 s");

    public static final Setting<Path> HEALTH_FILE = Setting.of("pagewire.node.healthFile", SettingType.PATH, null,
            "A file the node rewrites every health interval with SERVING (its event loops run, its server takes calls) or NOT_SERVING"
                    + " and why, for probes that start no JVM (the image's HEALTHCHECK); empty writes none");
    public static final Setting<Long> HEALTH_INTERVAL = Setting.nanos("pagewire.node.healthIntervalNs", 1_000_000_000L,
            "How often the health file is rewritten; an event loop silent for three intervals makes the node NOT_SERVING")
            .where(v -> v >= 10_000_000L && v <= 60_000_000_000L, "from 10 ms to 60 s");

    public static final Setting<Path> HOP_TRACE_DIRECTORY = Setting.of("pagewire.node.hopTraceDirectory", SettingType.PATH, null,
            "A directory where the node writes its hop trace, NODE_ID.hops, when it stops: the moment each post, lane frame,"
                    + " completion and bell passed (docs/benchmarks.md, the breakdown); empty traces nothing");
    public static final Setting<Integer> HOP_TRACE_EVENTS = Setting.count("pagewire.node.hopTraceEvents", 1_000_000,
            "How many events the hop trace keeps (16 bytes each, allocated when the node starts); later ones are counted, not kept")
            .between(1, 100_000_000);

    /** Every setting above, in declaration order. */
    public static final Setting<Long> CM_RESPONSE_TIMEOUT = Setting.nanos("pagewire.node.cmResponseTimeoutNs", 4_294_967_296L,
            "How long the connection manager waits for a peer's answer (to REQ, REP, DREQ, SIDR_REQ) before it sends again:"
                    + " librdmacm's 4.096 us x 2^20").where(v -> v >= 1_000_000L && v <= 60_000_000_000L, "from 1 ms to 60 s");
    public static final Setting<Integer> CM_RETRIES = Setting.count("pagewire.node.cmRetries", 15,
            "How many times the connection manager sends a request again before UNREACHABLE (or CONNECT_ERROR): librdmacm's 15")
            .between(0, 64);
    public static final Setting<Long> CM_TIME_WAIT = Setting.nanos("pagewire.node.cmTimeWaitNs", 500_000_000L,
            "How long a disconnected rdma_cm id stays in time-wait before TIMEWAIT_EXIT").where(v -> v >= 0 && v <= 60_000_000_000L,
            "from 0 to 60 s");

    public static final List<Setting<?>> SETTINGS = Setting.declaredIn(NodeConfiguration.class);

    private NodeConfiguration() {
    }
}
