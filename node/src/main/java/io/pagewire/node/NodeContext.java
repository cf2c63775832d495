package io.pagewire.node;

import static io.pagewire.node.NodeConfiguration.ACCEPT_PEERS;
import static io.pagewire.node.NodeConfiguration.ADDRESS;
import static io.pagewire.node.NodeConfiguration.BUSY_POLL;
import static io.pagewire.node.NodeConfiguration.CM_RESPONSE_TIMEOUT;
import static io.pagewire.node.NodeConfiguration.CM_RETRIES;
import static io.pagewire.node.NodeConfiguration.CM_TIME_WAIT;
import static io.pagewire.node.NodeConfiguration.EVENT_LOOP_THREADS;
import static io.pagewire.node.NodeConfiguration.HEALTH_FILE;
import static io.pagewire.node.NodeConfiguration.HEALTH_INTERVAL;
import static io.pagewire.node.NodeConfiguration.HOP_TRACE_EVENTS;
import static io.pagewire.node.NodeConfiguration.HOP_TRACE_DIRECTORY;
import static io.pagewire.node.NodeConfiguration.HOST;
import static io.pagewire.node.NodeConfiguration.ID;
import static io.pagewire.node.NodeConfiguration.METRICS_PORT;
import static io.pagewire.node.NodeConfiguration.PEERS;
import static io.pagewire.node.NodeConfiguration.PORT;
import static io.pagewire.node.NodeConfiguration.SHUTDOWN_GRACE;

import io.pagewire.config.Setting;
import io.pagewire.config.SettingValues;
import io.pagewire.kernel.KernelContext;
import io.pagewire.node.fabric.FabricContext;
import io.pagewire.node.nic.NicContext;
import io.pagewire.node.security.SecurityContext;
import io.pagewire.node.verbs.VerbsContext;
import io.pagewire.node.cm.CmTimings;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Everything one node runs with: its identity, address and peers, and the contexts of its kernel
 * agent, NIC, fabric, security and verbs service. {@link #conclude()} validates all of them, naming the
 * first bad knob.
 */
public final class NodeContext {
    private final SettingValues settings = new SettingValues(NodeConfiguration.SETTINGS);
    private Transport transport = Transport.NETTY;
    private final KernelContext kernel = new KernelContext();
    private final NicContext nic = new NicContext();
    private final FabricContext fabric = new FabricContext();
    private final SecurityContext security = new SecurityContext();
    private final VerbsContext verbs = new VerbsContext();

    /** The values of the node's own settings (not its parts'), by descriptor. */
    public SettingValues settings() {
        return settings;
    }

    /** The values of every setting of the node, its parts' included: where {@link NodeSettings} writes each one. */
    List<SettingValues> allSettings() {
        return List.of(settings, kernel.settings(), nic.settings(), fabric.settings(), security.settings(), verbs.settings());
    }

    /** The values that hold {@code setting}. */
    SettingValues settingsOf(Setting<?> setting) {
        for (SettingValues values : allSettings()) {
            if (values.declares(setting)) {
                return values;
            }
        }
        throw new IllegalArgumentException(setting + " is not a setting of a node");
    }

    public NodeContext nodeId(String value) {
        settings.set(ID, value);
        return this;
    }

    public NodeContext transport(Transport value) {
        transport = value;
        return this;
    }

    /** The address the gRPC server binds (NETTY). */
    public NodeContext host(String value) {
        settings.set(HOST, value);
        return this;
    }

    /** The port the gRPC server binds (NETTY); 0 picks a free one. */
    public NodeContext port(int value) {
        settings.set(PORT, value);
        return this;
    }

    /** The port of the Prometheus endpoint (/metrics); 0 picks a free one, -1 turns it off. */
    public NodeContext metricsPort(int value) {
        settings.set(METRICS_PORT, value);
        return this;
    }

    /** How long a graceful shutdown waits for in-flight work to drain. */
    public NodeContext shutdownGraceNs(long value) {
        settings.set(SHUTDOWN_GRACE, value);
        return this;
    }

    /**
     * Threads of the node's own Netty event loops (its server, its channels to peers, its ring
     * readers). One by default, like one NIC engine: a session's posts then reach the wire on the
     * thread that read them.
     */
    public NodeContext eventLoopThreads(int value) {
        settings.set(EVENT_LOOP_THREADS, value);
        return this;
    }

    /** Latency mode: how long an idle event loop keeps polling its sockets before it blocks; 0 blocks at once. */
    public NodeContext busyPollNs(long value) {
        settings.set(BUSY_POLL, value);
        return this;
    }

    /** A peer to connect to: its node id and its address ("host:port", or its node id for IN_PROCESS). */
    public NodeContext peer(String id, String target) {
        Map<String, String> peers = new LinkedHashMap<>(peers());
        peers.put(id, target);
        settings.set(PEERS, Collections.unmodifiableMap(peers));
        return this;
    }

    /** A node whose lanes this node accepts though it does not dial it (see {@link FabricContext#acceptPeer}). */
    public NodeContext acceptPeer(String id) {
        fabric.acceptPeer(id);
        return this;
    }

    public String nodeId() {
        return settings.get(ID);
    }

    public Transport transport() {
        return transport;
    }

    public String host() {
        return settings.get(HOST);
    }

    /** The IP address the node answers to for the connection manager, as configured (empty: the host name's). */
    public String address() {
        return settings.get(ADDRESS);
    }

    /** The connection manager's clocks. */
    public CmTimings cmTimings() {
        return new CmTimings(settings.get(CM_RESPONSE_TIMEOUT) / 1_000_000L, settings.get(CM_RETRIES), settings.get(CM_TIME_WAIT) / 1_000_000L);
    }

    /** Sets the IP address the node answers to for the connection manager. */
    public NodeContext address(String value) {
        settings.set(ADDRESS, value);
        return this;
    }

    public int port() {
        return settings.get(PORT);
    }

    public int metricsPort() {
        return settings.get(METRICS_PORT);
    }

    public long shutdownGraceNs() {
        return settings.get(SHUTDOWN_GRACE);
    }

    /** Where the node writes its health for probes that start no JVM, or null for nowhere. */
    public NodeContext healthFile(java.nio.file.Path value) {
        settings.set(HEALTH_FILE, value);
        return this;
    }

    public java.nio.file.Path healthFile() {
        return settings.get(HEALTH_FILE);
    }

    /** The directory where the node writes its hop trace when it stops, or null for no trace. */
    public NodeContext hopTraceDirectory(java.nio.file.Path value) {
        settings.set(HOP_TRACE_DIRECTORY, value);
        return this;
    }

    public java.nio.file.Path hopTraceDirectory() {
        return settings.get(HOP_TRACE_DIRECTORY);
    }

    public int hopTraceEvents() {
        return settings.get(HOP_TRACE_EVENTS);
    }

    /** How often the health file is rewritten. */
    public NodeContext healthIntervalNs(long value) {
        settings.set(HEALTH_INTERVAL, value);
        return this;
    }

    public long healthIntervalNs() {
        return settings.get(HEALTH_INTERVAL);
    }

    public int eventLoopThreads() {
        return settings.get(EVENT_LOOP_THREADS);
    }

    public long busyPollNs() {
        return settings.get(BUSY_POLL);
    }

    /** The peers to dial, by id. */
    public Map<String, String> peers() {
        return settings.get(PEERS);
    }

    public KernelContext kernel() {
        return kernel;
    }

    public NicContext nic() {
        return nic;
    }

    public FabricContext fabric() {
        return fabric;
    }

    /** Mutual TLS (the default on a network transport) or plaintext, and the application token. */
    public SecurityContext security() {
        return security;
    }

    /** The verbs service's quotas, pacing and shared-memory rings. */
    public VerbsContext verbs() {
        return verbs;
    }

    /** Validates every part; the node id is carried into the kernel and fabric contexts. */
    public NodeContext conclude() {
        if (transport == null) {
            throw new IllegalArgumentException("the node's transport must be set");
        }
        settings.check();
        // One peer list may serve every replica (a StatefulSet's): a node skips its own entry.
        Map<String, String> peers = new LinkedHashMap<>(peers());
        peers.remove(nodeId());
        settings.set(PEERS, Collections.unmodifiableMap(peers));
        if (metricsPort() > 0 && metricsPort() == port()) {
            throw new IllegalArgumentException(METRICS_PORT.name() + " must differ from " + PORT.name() + " (" + port() + ")");
        }
        peers.keySet().forEach(fabric::acceptPeer);
        settings.get(ACCEPT_PEERS).forEach(fabric::acceptPeer);
        fabric.nodeId(nodeId()).conclude();
        kernel.name(nodeId()).conclude();
        nic.conclude();
        verbs.conclude();
        // Last: a node whose other knobs are wrong hears about them before it is asked for certificates.
        security.conclude(nodeId(), transport == Transport.NETTY);
        fabric.peerCertificatesRequired(security.mutualTls());
        return this;
    }
}
