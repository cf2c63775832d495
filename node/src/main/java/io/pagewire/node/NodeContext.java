package io.pagewire.node;

import io.pagewire.kernel.KernelContext;
import io.pagewire.node.fabric.FabricContext;
import io.pagewire.node.nic.NicContext;
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
    private final Map<String, String> peers = new LinkedHashMap<>();
    private final KernelContext kernel = new KernelContext();
    private final NicContext nic = new NicContext();
    private final FabricContext fabric = new FabricContext();

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

    /** Validates every part; the node id is carried into the kernel and fabric contexts. */
    public NodeContext conclude() {
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
        if (transport == null) {
            throw new IllegalArgumentException("pagewire.node.transport must be set");
        }
        fabric.nodeId(nodeId).conclude();
        kernel.name(nodeId).conclude();
        nic.conclude();
        return this;
    }
}
