package io.pagewire.node;

import io.grpc.Server;
import io.grpc.ServerBuilder;
import io.grpc.ServerCallExecutorSupplier;
import io.grpc.health.v1.HealthCheckResponse.ServingStatus;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.grpc.protobuf.services.HealthStatusManager;
import io.grpc.protobuf.services.ProtoReflectionServiceV1;
import io.micrometer.core.instrument.binder.grpc.MetricCollectingServerInterceptor;
import io.micrometer.prometheus.PrometheusConfig;
import io.micrometer.prometheus.PrometheusMeterRegistry;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.node.cm.CmTimers;
import io.pagewire.node.cm.CmWire;
import io.pagewire.node.cm.ConnectionManager;
import io.pagewire.node.fabric.ChannelFactory;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.fabric.LinkBaseline;
import io.pagewire.node.loop.NodeEventLoops;
import io.pagewire.node.metrics.MetricsEndpoint;
import io.pagewire.node.metrics.NodeMetrics;
import io.pagewire.node.nic.Lids;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.NicTimers;
import io.pagewire.node.nic.PacketRouter;
import io.pagewire.node.security.BadInput;
import io.pagewire.node.security.CallerAuthentication;
import io.pagewire.node.security.SecurityConfiguration;
import io.pagewire.node.security.SecurityContext;
import io.pagewire.node.trace.HopTrace;
import io.pagewire.node.verbs.VerbsService;
import io.pagewire.node.verbs.VerbsSocket;
import io.pagewire.proto.baseline.LinkBaselineGrpc;
import io.pagewire.proto.fabric.CmMessage;
import io.pagewire.proto.fabric.FabricGrpc;
import io.pagewire.proto.verbs.Stat;
import io.pagewire.proto.verbs.VerbsGrpc;
import io.pagewire.ring.OwnerDirectory;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One virtual node: a kernel agent that owns its memory, a NIC beside it, the fabric that links it
 * to its peers and the verbs service applications use, all behind one gRPC server, with its meters
 * in a Prometheus registry.
 */
// The simpleclient flavour of Micrometer's Prometheus registry is the one chosen for the project;
// Micrometer marks it deprecated in favour of the client_java 1.x flavour.
@SuppressWarnings("deprecation")
public final class PagewireNode implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(PagewireNode.class.getName());
    private final NodeContext context;
    private final KernelAgent kernel;
    private final Nic nic;
    private final Fabric fabric;
    private final Server server;
    private final ExecutorService inProcessExecutor;
    private final NodeEventLoops eventLoops;
    private final ExecutorService verbsExecutor;
    private final ScheduledExecutorService scheduler;
    private final PrometheusMeterRegistry registry;
    private final NodeMetrics metrics;
    private final VerbsService verbs;
    private final ConnectionManager connections;
    private final HealthStatusManager health = new HealthStatusManager();
    private final MetricsEndpoint metricsEndpoint;
    private final CallerAuthentication authentication;
    /** Malformed input from any caller: refused, counted, logged at a bounded rate. */
    private final BadInput badInput;
    /**
     * The node's directory in its ring directory, locked while the node lives: its memory file, the
     * sessions' rings and page tables and its verbs socket go there; null (anonymous memory, no rings)
     * when the node offers no rings or the directory is not usable.
     */
    private final OwnerDirectory sharedFiles;
    /** The node's health in its health file, or null without one. */
    private volatile NodeHealth healthFile;
    /** Where C verbs programs on this host reach the node, or null (no usable ring directory). */
    private volatile VerbsSocket verbsSocket;
    /** The process's hop trace while this node holds it (pagewire.node.hopTraceDirectory), else null. */
    private final HopTrace.Armed hopTrace;

    /**
     * Removes what dead nodes left in the ring directory, then claims this node's own directory
     * there; null when the node offers no rings or the directory is not usable.
     */
    private static OwnerDirectory claimSharedFiles(Path ringDirectory, String nodeId) {
        if (ringDirectory == null || !Files.isDirectory(ringDirectory) || !Files.isWritable(ringDirectory)) {
            return null;
        }
        OwnerDirectory.Removal removal = OwnerDirectory.removeDead(ringDirectory, false);
        if (!removal.isEmpty()) {
            LOG.log(System.Logger.Level.INFO, "node " + nodeId + ": " + ringDirectory + ": " + removal.describe());
        }
        try {
            return OwnerDirectory.claim(ringDirectory, nodeId);
        } catch (UncheckedIOException e) {
            LOG.log(System.Logger.Level.WARNING, "node " + nodeId + " offers no shared memory to applications on its host: "
                    + e.getCause().getMessage());
            return null;
        }
    }

    private PagewireNode(NodeContext context) {
        this.context = context;
        this.sharedFiles = claimSharedFiles(context.verbs().ringDirectory(), context.nodeId());
        try {
            this.kernel = KernelAgent.start(context.kernel().memoryFile(sharedFiles == null ? null : sharedFiles.resolve("memory")));
        } catch (RuntimeException e) {
            if (sharedFiles != null) {
                sharedFiles.close();
            }
            throw e;
        }
        ChannelFactory channels;
        if (context.transport() == Transport.IN_PROCESS) {
            AtomicInteger threads = new AtomicInteger();
            inProcessExecutor = Executors.newCachedThreadPool(r -> {
                Thread t = new Thread(r, "pagewire-inprocess-" + context.nodeId() + "-" + threads.incrementAndGet());
                t.setDaemon(true);
                return t;
            });
            channels = ChannelFactory.inProcess(inProcessExecutor, context.fabric().maxMessageBytes());
            // No fabric sockets, but the ring bells still need a loop to be served on.
            eventLoops = new NodeEventLoops(context.nodeId(), 1, context.busyPollNs());
        } else {
            inProcessExecutor = null;
            eventLoops = new NodeEventLoops(context.nodeId(), context.eventLoopThreads(), context.busyPollNs());
            channels = ChannelFactory.netty(context.fabric(), eventLoops.workers(), eventLoops.channelType(),
                    context.security().mutualTls() ? context.security().channelCredentials() : null);
        }
        this.badInput = new BadInput(context.nodeId());
        this.fabric = new Fabric(context.fabric(), channels, badInput);
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
        this.connections = new ConnectionManager(context.nodeId(), Lids.of(context.nodeId()), cmAddress(context), new CmWire() {
            @Override
            public void send(String node, CmMessage message) {
                nic.router().sendManagement(node, message.toByteArray());
            }

            @Override
            public Collection<String> peers() {
                return fabric.connectedPeers();
            }
        }, CmTimers.on(scheduler), context.cmTimings(), new SecureRandom()::nextLong);
        nic.router().attachManagement(new PacketRouter.ManagementAgent() {
            @Override
            public void received(String peer, byte[] payload) {
                connections.received(peer, payload);
            }

            @Override
            public void peerRestarted(String peer) {
                connections.peerRestarted(peer);
            }
        });
        this.verbs = new VerbsService(context.nodeId(), context.verbs(), nic, fabric, eventLoops, context.busyPollNs(), metrics::snapshot,
                scheduler, verbsExecutor, sharedFiles == null ? null : sharedFiles.path(), connections);
        metrics.bindConnectionManager(connections);
        metrics.bindSessions(verbs::sessionCount, verbs::sessionsOnRings);
        metrics.bindPacing(verbs::pacedOperations, verbs::pacingRefusals);
        this.authentication = new CallerAuthentication(context.security(),
                Set.of(VerbsGrpc.SERVICE_NAME, "grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"));
        metrics.bindRefusals(authentication, fabric, badInput);
        this.server = buildServer();
        try {
            server.start();
        } catch (IOException e) {
            this.metricsEndpoint = null;
            close();
            throw new UncheckedIOException("node " + context.nodeId() + " cannot listen on " + context.host() + ":" + context.port()
                    + ": " + e.getMessage(), e);
        }
        MetricsEndpoint endpoint = null;
        if (context.metricsPort() >= 0) {
            try {
                endpoint = MetricsEndpoint.start(context.host(), context.metricsPort(), registry, context.security().metricsToken());
            } catch (UncheckedIOException e) {
                this.metricsEndpoint = null;
                close();
                throw new UncheckedIOException("node " + context.nodeId() + " cannot serve metrics on " + context.host() + ":"
                        + context.metricsPort() + ": " + e.getCause().getMessage(), e.getCause());
            }
        }
        this.metricsEndpoint = endpoint;
        Path ringDirectory = context.verbs().ringDirectory();
        if (kernel.memory().path() != null && sharedFiles != null) {
            // The socket lives in the node's own directory; programs name the node by port or by id, links to it.
            Path byId = ringDirectory.resolve(fileName("pagewire-" + context.nodeId() + ".verbs"));
            this.verbsSocket = VerbsSocket.start(sharedFiles.resolve("verbs"), verbs, verbsExecutor, context.transport() == Transport.IN_PROCESS
                    ? List.of(byId) : List.of(ringDirectory.resolve("pagewire-" + server.getPort() + ".verbs"), byId), badInput);
        }
        if (context.transport() == Transport.NETTY && !context.security().mutualTls()) {
            LOG.log(System.Logger.Level.WARNING, "node " + context.nodeId() + " serves in PLAINTEXT on " + boundAddress()
                    + ": no TLS, and any caller that reaches the port is taken at its word (" + SecurityConfiguration.TRANSPORT.name()
                    + "=plaintext, for local experiments only)");
        }
        health.setStatus("", ServingStatus.SERVING);
        health.setStatus(VerbsGrpc.SERVICE_NAME, ServingStatus.SERVING);
        health.setStatus(FabricGrpc.SERVICE_NAME, ServingStatus.SERVING);
        if (context.healthFile() != null) {
            this.healthFile = new NodeHealth(context.nodeId(), context.healthFile(), context.healthIntervalNs(), eventLoops.workers(),
                    () -> server.isShutdown() ? "the server is shut down (the node is stopping)" : null, scheduler);
        }
        // Last: a node that failed to start never closes, and would keep the process's trace armed.
        this.hopTrace = armHopTrace(context);
    }

    /** Why the node is not healthy now (a stuck event loop, a server shut down), or null when it is; null without a health file. */
    public String healthProblem() {
        NodeHealth h = healthFile;
        return h == null ? null : h.problem();
    }

    private static HopTrace.Armed armHopTrace(NodeContext context) {
        if (context.hopTraceDirectory() == null) {
            return null;
        }
        HopTrace.Armed armed = HopTrace.arm(context.hopTraceDirectory().resolve(context.nodeId() + ".hops"),
                "node " + context.nodeId() + ", pid " + ProcessHandle.current().pid(), context.hopTraceEvents());
        if (armed == null) {
            LOG.log(System.Logger.Level.WARNING, "node " + context.nodeId() + " writes no hop trace: another node of this process holds it");
        }
        return armed;
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
            InetSocketAddress address = new InetSocketAddress(context.host(), context.port());
            builder = (context.security().mutualTls() ? NettyServerBuilder.forAddress(address, context.security().serverCredentials())
                    : NettyServerBuilder.forAddress(address))
                    .bossEventLoopGroup(eventLoops.boss())
                    .workerEventLoopGroup(eventLoops.workers())
                    .channelType(eventLoops.serverChannelType())
                    .directExecutor()
                    .flowControlWindow(context.fabric().flowControlWindowBytes())
                    .permitKeepAliveTime(10, TimeUnit.SECONDS)
                    .keepAliveTime(30, TimeUnit.SECONDS)
                    .keepAliveTimeout(10, TimeUnit.SECONDS);
        }
        // Lanes and application sessions (posts, completions) run on the transport's threads: no
        // hand-off per message on the data path. Other application calls, which may wait for the
        // kernel (a store, a PINNED registration), run on their own pool so they never stall a lane.
        ServerCallExecutorSupplier executors = new ServerCallExecutorSupplier() {
            @Override
            public <ReqT, RespT> Executor getExecutor(io.grpc.ServerCall<ReqT, RespT> call, io.grpc.Metadata headers) {
                String method = call.getMethodDescriptor().getFullMethodName();
                boolean dataPath = FabricGrpc.SERVICE_NAME.equals(call.getMethodDescriptor().getServiceName())
                        || VerbsGrpc.getSessionMethod().getFullMethodName().equals(method)
                        || LinkBaselineGrpc.getSinkMethod().getFullMethodName().equals(method)
                        || LinkBaselineGrpc.getEchoMethod().getFullMethodName().equals(method);
                return dataPath ? null : verbsExecutor;
            }
        };
        return builder.callExecutor(executors)
                .intercept(authentication)
                .intercept(new MetricCollectingServerInterceptor(registry))
                .maxInboundMessageSize(context.fabric().maxMessageBytes())
                .addService(fabric.service())
                .addService(new LinkBaseline(fabric))
                .addService(badInput.guard(verbs.bindService(), BadInput.Source.VERBS))
                .addService(health.getHealthService())
                .addService(ProtoReflectionServiceV1.newInstance())
                .build();
    }

    /** A node id as part of a file name. */
    private static String fileName(String name) {
        return name.replaceAll("[^A-Za-z0-9_.-]", "_");
    }

    /** Dials a peer's lanes. */
    public void connect(String peer, String target) {
        fabric.connect(peer, target);
    }

    public String id() {
        return context.nodeId();
    }

    /** Where the verbs and fabric port is bound, as the log should say it: {@code 0.0.0.0:7100 (all interfaces)}. */
    public String boundAddress() {
        if (context.transport() == Transport.IN_PROCESS) {
            return "in-process:" + context.nodeId();
        }
        String host = context.host();
        return host + ":" + server.getPort() + (host.equals("0.0.0.0") || host.equals("::") ? " (all interfaces)" : "");
    }

    /** How the port is protected, as the log should say it. */
    public String security() {
        if (context.transport() == Transport.IN_PROCESS) {
            return "in-process transport (no port)";
        }
        SecurityContext security = context.security();
        if (!security.mutualTls()) {
            return "PLAINTEXT: no TLS, callers not authenticated" + (security.applicationToken().isEmpty() ? "" : " (verbs need the application token)");
        }
        return "mutual TLS as " + security.certificateFile() + ", trusting " + security.trustedCaFile()
                + (security.applicationToken().isEmpty() ? "" : ", verbs need the application token");
    }

    /** Where peers and applications on this host reach this node: "host:port", or the in-process server name. */
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

    /** The node's own Netty event loops: its server, its lanes to peers and its ring bells run on them. */
    public NodeEventLoops eventLoops() {
        return eventLoops;
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

    /** Every meter's value now, as `pagewire stat` shows them. */
    public List<Stat> stats() {
        return metrics.snapshot();
    }

    /** Where the metrics endpoint is bound, as the log should say it, or null when metrics are off. */
    public String metricsBoundAddress() {
        return metricsEndpoint == null ? null : metricsEndpoint.boundAddress();
    }

    /** Where Prometheus scrapes this node ("http://host:port/metrics"), or null when metrics are off. */
    public String metricsUrl() {
        return metricsEndpoint == null ? null : metricsEndpoint.url();
    }

    /**
     * Shuts down gracefully, as on SIGTERM: health turns NOT_SERVING so that load balancers and
     * clients stop sending, no new calls are accepted, in-flight work requests drain (bounded by the
     * grace period), then sessions end and everything closes.
     *
     * @return whether everything drained within the grace period
     */
    public boolean shutdownGracefully() {
        health.enterTerminalState();
        server.shutdown();
        long deadline = System.nanoTime() + context.shutdownGraceNs();
        boolean drained = false;
        while (System.nanoTime() - deadline < 0) {
            if (nic.queuePairs().stream().allMatch(qp -> qp.outstanding() == 0 && qp.parkedParts() == 0)) {
                drained = true;
                break;
            }
            try {
                Thread.sleep(10);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        close();
        return drained;
    }

    /** Application sessions open now. */
    public int sessions() {
        return verbs.sessionCount();
    }

    /** Control-plane operations started later because their caller was over its rate ({@code pagewire.quota.controlOpsPerSecond}). */
    public long controlOperationsDelayed() {
        return verbs.pacedOperations();
    }

    /**
     * Stops the server, the NIC (closing every endpoint, which releases pins and memory), the fabric and
     * the kernel. Each step runs even when one before it fails: the node's files in the ring directory
     * (its emulated RAM among them) must go whatever else went wrong.
     */
    @Override
    public void close() {
        try {
            step("hop trace", hopTrace == null ? null : hopTrace::close);
            step("health file", healthFile == null ? null : healthFile::close);
            step("verbs socket", verbsSocket == null ? null : verbsSocket::close);
            step("metrics endpoint", metricsEndpoint == null ? null : metricsEndpoint::close);
            step("server", server == null ? null : server::shutdownNow);
            step("connection manager", connections == null ? null : connections::close);
            step("verbs service", verbs == null ? null : verbs::close);
            step("NIC", nic::close);
            step("fabric", fabric::close);
            step("server termination", server == null ? null : () -> {
                try {
                    server.awaitTermination(5, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            });
            step("kernel agent", kernel::close);
        } finally {
            step("shared files", sharedFiles == null ? null : sharedFiles::close);
            step("event loops", eventLoops == null ? null : eventLoops::close);
            step("in-process executor", inProcessExecutor == null ? null : inProcessExecutor::shutdownNow);
            step("verbs executor", verbsExecutor == null ? null : () -> {
                verbsExecutor.shutdownNow();
                scheduler.shutdownNow();
            });
            step("meter registry", registry == null ? null : registry::close);
        }
    }

    /**
     * The address the node answers to for rdma_cm: the configured one, else the one the machine's host
     * name resolves to (in a container, the container's own).
     */
    private static InetAddress cmAddress(NodeContext context) {
        String configured = context.address();
        if (configured == null || configured.isBlank()) {
            try {
                return InetAddress.getLocalHost();
            } catch (UnknownHostException e) {
                LOG.log(System.Logger.Level.WARNING, "node " + context.nodeId() + ": this machine's host name does not resolve (" + e.getMessage()
                        + "); the connection manager answers to " + InetAddress.getLoopbackAddress().getHostAddress()
                        + " (set pagewire.node.address)");
                return InetAddress.getLoopbackAddress();
            }
        }
        try {
            return InetAddress.getByName(configured);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("pagewire.node.address: " + configured + " is not an IP address this machine can resolve ("
                    + e.getMessage() + ")", e);
        }
    }

    /** The node's connection manager (rdma_cm's service). */
    public ConnectionManager connectionManager() {
        return connections;
    }

    /** One step of {@link #close}: a failure is logged and the next step runs. */
    private void step(String what, Runnable action) {
        if (action == null) {
            return;
        }
        try {
            action.run();
        } catch (RuntimeException | Error e) { // an OutOfMemoryError too: the files must still go
            LOG.log(System.Logger.Level.WARNING, "node " + context.nodeId() + ": closing its " + what + " failed", e);
        }
    }
}
