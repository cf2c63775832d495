package io.pagewire.node.loop;

import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
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
import java.nio.channels.spi.SelectorProvider;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The Netty event loops of one node, shared by its gRPC server and its channels to peers and to no
 * other node: nodes in one JVM (the demo, the tests) then never wait on each other's work. Epoll
 * where the platform has it, NIO elsewhere. Each loop runs a {@link LoopDutyCycle}: pollers (the
 * sessions' request rings) get a turn between passes over the sockets, and in latency mode an idle
 * loop keeps polling its sockets for {@code busyPollNs} before it blocks (a bounded spin, so a 2-core
 * machine is not starved). The loops also serve the Unix-domain sockets that ring bells use, so a
 * bell that rings wakes the very thread that then sends on the fabric.
 */
public final class NodeEventLoops implements AutoCloseable {
    private final EventLoopGroup boss;
    private final EventLoopGroup workers;
    private final Class<? extends ServerChannel> serverChannelType;
    private final Class<? extends Channel> channelType;
    private final Class<? extends ServerChannel> domainServerChannelType;
    private final boolean epoll;

    public NodeEventLoops(String nodeId, int threads, long busyPollNs) {
        SelectStrategyFactory strategy = () -> new LoopDutyCycle(busyPollNs);
        epoll = Epoll.isAvailable();
        if (epoll) {
            boss = new EpollEventLoopGroup(1, threads("boss", nodeId));
            workers = new EpollEventLoopGroup(threads, threads("loop", nodeId), strategy);
            serverChannelType = EpollServerSocketChannel.class;
            channelType = EpollSocketChannel.class;
            domainServerChannelType = EpollServerDomainSocketChannel.class;
        } else {
            boss = new NioEventLoopGroup(1, threads("boss", nodeId));
            workers = new NioEventLoopGroup(threads, threads("loop", nodeId), SelectorProvider.provider(), strategy);
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
}
