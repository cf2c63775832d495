package io.pagewire.node;

import io.grpc.Server;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyServerBuilder;
import io.pagewire.kernel.KernelAgent;
import io.pagewire.node.fabric.ChannelFactory;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.NicTimers;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * One virtual node: a kernel agent that owns its memory, a NIC beside it, and the fabric that links
 * it to its peers, all behind one gRPC server.
 */
public final class PagewireNode implements AutoCloseable {
    private final NodeContext context;
    private final KernelAgent kernel;
    private final Nic nic;
    private final Fabric fabric;
    private final Server server;
    private final ExecutorService inProcessExecutor;

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
        if (context.transport() == Transport.IN_PROCESS) {
            return InProcessServerBuilder.forName(context.nodeId())
                    .executor(inProcessExecutor)
                    .maxInboundMessageSize(context.fabric().maxMessageBytes())
                    .addService(fabric.service())
                    .build();
        }
        return NettyServerBuilder.forAddress(new InetSocketAddress(context.host(), context.port()))
                .directExecutor()
                .flowControlWindow(context.fabric().flowControlWindowBytes())
                .maxInboundMessageSize(context.fabric().maxMessageBytes())
                .permitKeepAliveTime(10, TimeUnit.SECONDS)
                .addService(fabric.service())
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

    /** Stops the server, the NIC (closing every endpoint, which releases pins and memory), the fabric and the kernel. */
    @Override
    public void close() {
        if (server != null) {
            server.shutdownNow();
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
    }
}
