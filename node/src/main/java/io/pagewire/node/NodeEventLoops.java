package io.pagewire.node;

import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.SelectStrategy;
import io.grpc.netty.shaded.io.netty.channel.SelectStrategyFactory;
import io.grpc.netty.shaded.io.netty.channel.ServerChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.Epoll;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.epoll.EpollSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.nio.NioEventLoopGroup;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioServerSocketChannel;
import io.grpc.netty.shaded.io.netty.channel.socket.nio.NioSocketChannel;
import io.grpc.netty.shaded.io.netty.util.IntSupplier;
import java.nio.channels.spi.SelectorProvider;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The Netty event loops of one node, shared by its gRPC server and its channels to peers and to no
 * other node: nodes in one JVM (the demo, the tests) then never wait on each other's work. Epoll
 * where the platform has it, NIO elsewhere. In latency mode an idle loop keeps polling its sockets
 * for {@code busyPollNs} before it blocks (a bounded spin, so a 2-core machine is not starved).
 */
public final class NodeEventLoops implements AutoCloseable {
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final Class<? extends ServerChannel> serverChannelType;
    private final Class<? extends Channel> channelType;

    public NodeEventLoops(String nodeId, int threads, long busyPollNs) {
        SelectStrategyFactory strategy = busyPollNs > 0 ? () -> new SpinThenBlock(busyPollNs) : null;
        if (Epoll.isAvailable()) {
            boss = new EpollEventLoopGroup(1, threads("boss", nodeId));
            workers = strategy == null ? new EpollEventLoopGroup(threads, threads("loop", nodeId))
                    : new EpollEventLoopGroup(threads, threads("loop", nodeId), strategy);
            serverChannelType = EpollServerSocketChannel.class;
            channelType = EpollSocketChannel.class;
        } else {
            boss = new NioEventLoopGroup(1, threads("boss", nodeId));
            workers = strategy == null ? new NioEventLoopGroup(threads, threads("loop", nodeId))
                    : new NioEventLoopGroup(threads, threads("loop", nodeId), SelectorProvider.provider(), strategy);
            serverChannelType = NioServerSocketChannel.class;
            channelType = NioSocketChannel.class;
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
                Thread.onSpinWait();
                return SelectStrategy.CONTINUE;
            }
            idleSinceNs = -1;
            return SelectStrategy.SELECT;
        }
    }
}
