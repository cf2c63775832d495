package io.pagewire.node;

import io.pagewire.kernel.KernelContext;
import io.pagewire.node.fabric.FabricContext;
import io.pagewire.node.nic.NicContext;
import io.pagewire.node.security.SecurityContext;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Everything one node runs with: its identity and address, its peers, and the contexts of its kernel
 * agent, NIC and fabric. {@link #conclude()} validates all of them, naming the first bad knob.
 */
public final class NodeContext {
    private String nodeId = "node-1";
    private Transport transport = Transport.NETTY;
    private String host = "0.0.0.0";
    private int port = 7100;
    private int metricsPort = 9464;
    private long shutdownGraceNs = 10_000_000_000L;
    private int eventLoopThreads = 1;
    private long busyPollNs;
    private String ringDirectory = System.getProperty("pagewire.node.ringDirectory", defaultRingDirectory());
    private int ringBytes = 1 << 20;
    private int sessionsLimit = 1024;
    private long virtualBytesPerSession = 1L << 40;
    private double controlOpsPerSecond = CONTROL_OPS_PER_SECOND_DEFAULT;
    private int controlBurst = CONTROL_BURST_DEFAULT;
    private final Map<String, String> peers = new LinkedHashMap<>();
    private final KernelContext kernel = new KernelContext();
    private final NicContext nic = new NicContext();
    private final FabricContext fabric = new FabricContext();
    private final SecurityContext security = new SecurityContext();

    public NodeContext nodeId(String value) {
        nodeId = value;
        return this;
    }

    public NodeContext transport(Transport value) {
        transport = value;
        return this;
    }

    /** The address the gRPC server binds (NETTY). */
    public NodeContext host(String value) {
        host = value;
        return this;
    }

    /** The port the gRPC server binds (NETTY); 0 picks a free one. */
    public NodeContext port(int value) {
        port = value;
        return this;
    }

    /** The port of the Prometheus endpoint (/metrics); 0 picks a free one, -1 turns it off. */
    public NodeContext metricsPort(int value) {
        metricsPort = value;
        return this;
    }

    /** How long a graceful shutdown waits for in-flight work to drain. */
    public NodeContext shutdownGraceNs(long value) {
        shutdownGraceNs = value;
        return this;
    }

    /**
     * Threads of the node's own Netty event loops (its server, its channels to peers, its ring
     * readers). One by default, like one NIC engine: a session's posts then reach the wire on the
     * thread that read them. More spread many peers' lanes over more cores, at the price of a
     * hand-off wherever a session's loop is not its lane's.
     */
    public NodeContext eventLoopThreads(int value) {
        eventLoopThreads = value;
        return this;
    }

    /**
     * Latency mode: how long an idle event loop keeps polling its sockets before it blocks. 0 blocks at
     * once (the default); a few tens of microseconds saves the wake-up of a blocked thread per message.
     */
    public NodeContext busyPollNs(long value) {
        busyPollNs = value;
        return this;
    }

    /**
     * Where the node makes the shared-memory rings of co-located applications (user-level access);
     * empty turns them off, and every application then uses its gRPC stream. Containers that share
     * this directory as a volume share the rings too.
     */
    public NodeContext ringDirectory(String value) {
        ringDirectory = value;
        return this;
    }

    /** Record space of each of a session's two rings (a power of two). */
    public NodeContext ringBytes(int value) {
        ringBytes = value;
        return this;
    }

    /** Application sessions the node serves at once ({@code pagewire.quota.sessions}); one more is refused with RESOURCE_EXHAUSTED. */
    public NodeContext sessionsLimit(int value) {
        sessionsLimit = value;
        return this;
    }

    /** The default of {@link #controlOpsPerSecond(double)}. */
    public static final double CONTROL_OPS_PER_SECOND_DEFAULT = 500;
    /** The default of {@link #controlBurst(int)}. */
    public static final int CONTROL_BURST_DEFAULT = 100;

    /**
     * Control-plane operations (session opens, allocations, registrations, queue pairs, counters) one
     * caller may start per second on average ({@code pagewire.quota.controlOpsPerSecond}); more start
     * later, their calls waiting. 0 turns pacing off.
     */
    public NodeContext controlOpsPerSecond(double value) {
        controlOpsPerSecond = value;
        return this;
    }

    /** Control-plane operations a caller may start back to back before its rate applies ({@code pagewire.quota.controlBurst}). */
    public NodeContext controlBurst(int value) {
        controlBurst = value;
        return this;
    }

    public double controlOpsPerSecond() {
        return controlOpsPerSecond;
    }

    public int controlBurst() {
        return controlBurst;
    }

    /** Virtual memory one session may allocate ({@code pagewire.quota.virtualBytesPerSession}). */
    public NodeContext virtualBytesPerSession(long value) {
        virtualBytesPerSession = value;
        return this;
    }

    public int sessionsLimit() {
        return sessionsLimit;
    }

    public long virtualBytesPerSession() {
        return virtualBytesPerSession;
    }

    public String ringDirectory() {
        return ringDirectory;
    }

    public int ringBytes() {
        return ringBytes;
    }

    /** /dev/shm where the host has it (memory, not disk), else the temporary directory. */
    static String defaultRingDirectory() {
        java.nio.file.Path shm = java.nio.file.Path.of("/dev/shm");
        return java.nio.file.Files.isDirectory(shm) && java.nio.file.Files.isWritable(shm) ? shm.toString()
                : System.getProperty("java.io.tmpdir");
    }

    public int eventLoopThreads() {
        return eventLoopThreads;
    }

    public long busyPollNs() {
        return busyPollNs;
    }

    public int metricsPort() {
        return metricsPort;
    }

    public long shutdownGraceNs() {
        return shutdownGraceNs;
    }

    /** A peer to connect to: its node id and its address ("host:port", or its node id for IN_PROCESS). */
    public NodeContext peer(String id, String target) {
        peers.put(id, target);
        return this;
    }

    /** A node whose lanes this node accepts though it does not dial it (see {@link FabricContext#acceptPeer}). */
    public NodeContext acceptPeer(String id) {
        fabric.acceptPeer(id);
        return this;
    }

    public String nodeId() {
        return nodeId;
    }

    public Transport transport() {
        return transport;
    }

    public String host() {
        return host;
    }

    public int port() {
        return port;
    }

    public Map<String, String> peers() {
        return peers;
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

    /** Validates every part; the node id is carried into the kernel and fabric contexts. */
    public NodeContext conclude() {
        // One peer list may serve every replica (a StatefulSet's): a node skips its own entry.
        peers.remove(nodeId);
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("pagewire.node.port must be from 0 to 65535, was " + port);
        }
        if (metricsPort < -1 || metricsPort > 65535) {
            throw new IllegalArgumentException("pagewire.node.metricsPort must be from 0 to 65535, or -1 for none, was " + metricsPort);
        }
        if (metricsPort > 0 && metricsPort == port) {
            throw new IllegalArgumentException("pagewire.node.metricsPort must differ from pagewire.node.port (" + port + ")");
        }
        if (shutdownGraceNs < 0) {
            throw new IllegalArgumentException("pagewire.node.shutdownGraceNs must not be negative, was " + shutdownGraceNs);
        }
        if (eventLoopThreads < 1 || eventLoopThreads > 64) {
            throw new IllegalArgumentException("pagewire.node.eventLoopThreads must be from 1 to 64, was " + eventLoopThreads);
        }
        if (busyPollNs < 0 || busyPollNs > 1_000_000_000L) {
            throw new IllegalArgumentException("pagewire.node.busyPollNs must be from 0 to 1 s, was " + busyPollNs);
        }
        if (ringBytes < 4096 || Integer.bitCount(ringBytes) != 1) {
            throw new IllegalArgumentException("pagewire.node.ringBytes must be a power of two of at least 4096, was " + ringBytes);
        }
        if (!(controlOpsPerSecond >= 0) || Double.isInfinite(controlOpsPerSecond)) {
            throw new IllegalArgumentException("pagewire.quota.controlOpsPerSecond must be 0 (off) or a positive rate, was " + controlOpsPerSecond);
        }
        if (controlBurst < 1) {
            throw new IllegalArgumentException("pagewire.quota.controlBurst must be at least 1, was " + controlBurst);
        }
        if (sessionsLimit < 1) {
            throw new IllegalArgumentException("pagewire.quota.sessions must be at least 1, was " + sessionsLimit);
        }
        if (virtualBytesPerSession < 1) {
            throw new IllegalArgumentException("pagewire.quota.virtualBytesPerSession must be at least 1, was " + virtualBytesPerSession);
        }
        if (ringDirectory == null) {
            ringDirectory = "";
        }
        if (transport == null) {
            throw new IllegalArgumentException("pagewire.node.transport must be set");
        }
        peers.keySet().forEach(fabric::acceptPeer);
        fabric.nodeId(nodeId).conclude();
        kernel.name(nodeId).conclude();
        nic.conclude();
        // Last: a node whose other knobs are wrong hears about them before it is asked for certificates.
        security.conclude(nodeId, transport == Transport.NETTY);
        fabric.peerCertificatesRequired(security.mutualTls());
        return this;
    }
}
