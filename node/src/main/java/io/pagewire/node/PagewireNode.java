package io.pagewire.node;

import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.ServerCallExecutorSupplier;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.micrometer.prometheus.PrometheusConfig;
import io.micrometer.prometheus.PrometheusMeterRegistry;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.node.fabric.ChannelFactory;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.metrics.NodeMetrics;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.NicTimers;
import io.pagewire.node.verbs.VerbsService;
import io.pagewire.proto.fabric.FabricGrpc;
import io.pagewire.proto.verbs.Stat;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One virtual node: a kernel agent that owns its memory, a NIC beside it, the fabric that links it
 * to its peers and the verbs service applications use, all behind one gRPC server, with its meters
 * in a Prometheus registry.
 */
public final class PagewireNode implements AutoCloseable {
    private final NodeContext context;
    private final KernelAgent kernel;
    private final Nic nic;
    private final Fabric fabric;
    private final Server server;
    private final ExecutorService inProcessExecutor;
    private final ExecutorService verbsExecutor;
    private final ScheduledExecutorService scheduler;
    private final PrometheusMeterRegistry registry;
    private final NodeMetrics metrics;
    private final VerbsService verbs;

    private PagewireNode(NodeContext context) {
        this.context = context;
        this.kernel = KernelAgent.start(context.kernel());
        ChannelFactory channels;
        if (context.transport() == Transport.IN_PROCESS) {
            AtomicInteger threads = new AtomicInteger();
            inProcessExecutor = Executors.newCachedThreadPool(r -> {
                Thread t = new Thread(r, "pagewire-inprocess-" + context.nodeId() + "-" + threads.incrementAndGet());
                t.setDaemon(true);
                return t;
            });
            channels = ChannelFactory.inProcess(inProcessExecutor, context.fabric().maxMessageBytes());
        } else {
            inProcessExecutor = null;
            channels = ChannelFactory.netty(context.fabric());
        }
        this.fabric = new Fabric(context.fabric(), channels);
        this.nic = new Nic(context.nodeId(), kernel, context.nic(), NicTimers.threaded(context.nodeId()), fabric);
        fabric.attach(nic);
        this.registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        registry.config().commonTags("node", context.nodeId());
        this.metrics = NodeMetrics.bind(registry, kernel, nic, fabric);
        AtomicInteger verbsThreads = new AtomicInteger();
        this.verbsExecutor = Executors.newFixedThreadPool(8, r -> {
            Thread t = new Thread(r, "pagewire-verbs-" + context.nodeId() + "-" + verbsThreads.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        ScheduledThreadPoolExecutor timers = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "pagewire-node-" + context.nodeId());
            t.setDaemon(true);
            return t;
        });
        timers.setRemoveOnCancelPolicy(true);
        this.scheduler = timers;
        this.verbs = new VerbsService(this, scheduler);
        this.server = buildServer();
        try {
            server.start();
        } catch (IOException e) {
            close();
            throw new UncheckedIOException("node " + context.nodeId() + " cannot listen on " + context.host() + ":" + context.port()
                    + ": " + e.getMessage(), e);
        }
    }

    /** Starts a node: validates its configuration, starts its server, and dials its peers. */
    public static PagewireNode start(NodeContext context) {
        PagewireNode node = new PagewireNode(context.conclude());
        for (Map.Entry<String, String> peer : context.peers().entrySet()) {
            node.connect(peer.getKey(), peer.getValue());
        }
        return node;
    }

    private Server buildServer() {
        ServerBuilder<?> builder;
        if (context.transport() == Transport.IN_PROCESS) {
            builder = InProcessServerBuilder.forName(context.nodeId()).executor(inProcessExecutor);
        } else {
            builder = NettyServerBuilder.forAddress(new InetSocketAddress(context.host(), context.port()))
                    .directExecutor()
                    .flowControlWindow(context.fabric().flowControlWindowBytes())
                    .permitKeepAliveTime(10, TimeUnit.SECONDS)
                    .keepAliveTime(30, TimeUnit.SECONDS)
                    .keepAliveTimeout(10, TimeUnit.SECONDS);
        }
        // Lanes run on the transport's threads (no hand-off per message); application calls, which
        // may wait for the kernel, run on their own pool so they never stall a lane.
        ServerCallExecutorSupplier executors = new ServerCallExecutorSupplier() {
            @Override
            public <ReqT, RespT> java.util.concurrent.Executor getExecutor(io.grpc.ServerCall<ReqT, RespT> call, io.grpc.Metadata headers) {
                return FabricGrpc.SERVICE_NAME.equals(call.getMethodDescriptor().getServiceName()) ? null : verbsExecutor;
            }
        };
        return builder.callExecutor(executors)
                .maxInboundMessageSize(context.fabric().maxMessageBytes())
                .addService(fabric.service())
                .addService(verbs)
                .build();
    }

    /** Dials a peer's lanes. */
    public void connect(String peer, String target) {
        fabric.connect(peer, target);
    }

    public String id() {
        return context.nodeId();
    }

    /** Where peers and applications reach this node: "host:port", or the in-process server name. */
    public String target() {
        if (context.transport() == Transport.IN_PROCESS) {
            return context.nodeId();
        }
        String host = context.host().equals("0.0.0.0") ? "127.0.0.1" : context.host();
        return host + ":" + server.getPort();
    }

    public NodeContext context() {
        return context;
    }

    public KernelAgent kernel() {
        return kernel;
    }

    public Nic nic() {
        return nic;
    }

    public Fabric fabric() {
        return fabric;
    }

    /** The node's meters, as Prometheus scrapes them. */
    public PrometheusMeterRegistry registry() {
        return registry;
    }

    public NodeMetrics metrics() {
        return metrics;
    }

    /** Every meter's value now, as `pagewire stat` shows them. */
    public List<Stat> stats() {
        return metrics.snapshot();
    }

    /** Application sessions open now. */
    public int sessions() {
        return verbs.sessionCount();
    }

    /** Stops the server, the NIC (closing every endpoint, which releases pins and memory), the fabric and the kernel. */
    @Override
    public void close() {
        if (server != null) {
            server.shutdownNow();
        }
        if (verbs != null) {
            verbs.closeAll();
        }
        nic.close();
        fabric.close();
        if (server != null) {
            try {
                server.awaitTermination(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        kernel.close();
        if (inProcessExecutor != null) {
            inProcessExecutor.shutdownNow();
        }
        if (verbsExecutor != null) {
            verbsExecutor.shutdownNow();
            scheduler.shutdownNow();
        }
        if (registry != null) {
            registry.close();
        }
    }
}
