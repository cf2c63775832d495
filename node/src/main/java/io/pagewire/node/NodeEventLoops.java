package io.pagewire.node;

import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.SelectStrategy;
import io.grpc.netty.shaded.io.netty.channel.SelectStrategyFactory;
import io.grpc.netty.shaded.io.netty.channel.ServerChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.nio.NioEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerDomainSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.unix.DomainSocketAddress;
import java.net.SocketAddress;
import java.net.UnixDomainSocketAddress;
import java.nio.file.Path;
import io.grpc.netty.shaded.io.netty.util.IntSupplier;
import java.nio.channels.spi.SelectorProvider;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The Netty event loops of one node, shared by its gRPC server and its channels to peers and to no
 * other node: nodes in one JVM (the demo, the tests) then never wait on each other's work. Epoll
 * where the platform has it, NIO elsewhere. In latency mode an idle loop keeps polling its sockets
 * for {@code busyPollNs} before it blocks (a bounded spin, so a 2-core machine is not starved). The
 * loops also serve the Unix-domain sockets that ring bells use, so a bell that rings wakes the very
 * thread that then sends on the fabric.
 */
public final class NodeEventLoops implements AutoCloseable {
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final Class<? extends ServerChannel> serverChannelType;
    private final Class<? extends Channel> channelType;
    private final Class<? extends ServerChannel> domainServerChannelType;
    private final boolean epoll;

    public NodeEventLoops(String nodeId, int threads, long busyPollNs) {
        SelectStrategyFactory strategy = busyPollNs > 0 ? () -> new SpinThenBlock(busyPollNs) : null;
        epoll = Epoll.isAvailable();
        if (epoll) {
            boss = new EpollEventLoopGroup(1, threads("boss", nodeId));
            workers = strategy == null ? new EpollEventLoopGroup(threads, threads("loop", nodeId))
                    : new EpollEventLoopGroup(threads, threads("loop", nodeId), strategy);
            serverChannelType = EpollServerSocketChannel.class;
            channelType = EpollSocketChannel.class;
            domainServerChannelType = EpollServerDomainSocketChannel.class;
        } else {
            boss = new NioEventLoopGroup(1, threads("boss", nodeId));
            workers = strategy == null ? new NioEventLoopGroup(threads, threads("loop", nodeId))
                    : new NioEventLoopGroup(threads, threads("loop", nodeId), SelectorProvider.provider(), strategy);
            serverChannelType = NioServerSocketChannel.class;
            channelType = NioSocketChannel.class;
            domainServerChannelType = NioServerDomainSocketChannel.class;
        }
    }

    public EventLoopGroup boss() {
        return boss;
    }

    public EventLoopGroup workers() {
        return workers;
    }

    public Class<? extends ServerChannel> serverChannelType() {
        return serverChannelType;
    }

    public Class<? extends Channel> channelType() {
        return channelType;
    }

    /** The server channel type for a Unix-domain socket on these loops. */
    public Class<? extends ServerChannel> domainServerChannelType() {
        return domainServerChannelType;
    }

    /** The address of a Unix-domain socket at {@code path}, in the form these loops' channels bind. */
    public SocketAddress domainAddress(Path path) {
        return epoll ? new DomainSocketAddress(path.toString()) : UnixDomainSocketAddress.of(path);
    }

    private static ThreadFactory threads(String role, String nodeId) {
        AtomicInteger count = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, "pagewire-" + role + "-" + nodeId + "-" + count.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    /** Stops the loops; call after the server and channels on them are shut down. */
    @Override
    public void close() {
        boss.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        workers.shutdownGracefully(0, 1, TimeUnit.SECONDS);
        boss.terminationFuture().awaitUninterruptibly(5, TimeUnit.SECONDS);
        workers.terminationFuture().awaitUninterruptibly(5, TimeUnit.SECONDS);
    }

    /**
     * Polls without blocking while the loop has been idle for less than {@code spinNs}, then blocks as
     * usual. Each loop has its own instance (the factory makes one per loop).
     */
    static final class SpinThenBlock implements SelectStrategy {
        private final long spinNs;
        private long idleSinceNs = -1;

        SpinThenBlock(long spinNs) {
            this.spinNs = spinNs;
        }

        @Override
        public int calculateStrategy(IntSupplier selectNow, boolean hasTasks) throws Exception {
            int ready = selectNow.get();
            if (ready > 0 || hasTasks) {
                idleSinceNs = -1;
                return ready;
            }
            long now = System.nanoTime();
            if (idleSinceNs < 0) {
                idleSinceNs = now;
            }
            if (now - idleSinceNs < spinNs) {
                // Yield, not a spin hint: a 2-core machine runs more pollers than cores, and the
                // one that has the work must get a core within microseconds, not a time slice.
                Thread.yield();
                return SelectStrategy.CONTINUE;
            }
            idleSinceNs = -1;
            return SelectStrategy.SELECT;
        }
    }
}
