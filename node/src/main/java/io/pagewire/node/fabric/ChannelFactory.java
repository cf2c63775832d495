package io.pagewire.node.fabric;

import io.grpc.ChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.grpc.netty.shaded.io.netty.channel.Channel;
import io.grpc.netty.shaded.io.netty.channel.EventLoopGroup;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;

/** How the fabric opens a channel to a peer: real HTTP/2 over TCP, or gRPC's in-process transport for tests. */
public interface ChannelFactory {
    /** A channel to {@code peer} at {@code target}; with TLS, the peer's certificate must name {@code peer}. */
    ManagedChannel open(String peer, String target);

    /**
     * Whether payloads must be copied before they are handed to a stream: the in-process transport
     * passes message objects to the other side by reference, to be read after the send returns.
     */
    boolean copiesPayloads();

    /**
     * Netty channels with a direct executor: inbound batches are handled on the event loop, without
     * a thread hand-off per message. The loops are the node's own (its server runs on them too).
     * {@code tls} null dials in plaintext.
     */
    static ChannelFactory netty(FabricContext context, EventLoopGroup loops, Class<? extends Channel> channelType, ChannelCredentials tls) {
        return new ChannelFactory() {
            @Override
            public ManagedChannel open(String peer, String target) {
                // With TLS the authority is the peer's id, so the handshake checks that the node at
                // the address holds a certificate for that id (its DNS name), whatever the address.
                NettyChannelBuilder builder = tls == null ? NettyChannelBuilder.forTarget(target).usePlaintext()
                        : NettyChannelBuilder.forTarget(target, tls).overrideAuthority(peer);
                return builder
                        .eventLoopGroup(loops)
                        .channelType(channelType)
                        .directExecutor()
                        .flowControlWindow(context.flowControlWindowBytes())
                        .maxInboundMessageSize(context.maxMessageBytes())
                        .keepAliveTime(30, TimeUnit.SECONDS)
                        .build();
            }

            @Override
            public boolean copiesPayloads() {
                return false;
            }
        };
    }

    /**
     * In-process channels to servers named by the target. The executor must not be direct: the
     * transport would otherwise run the peer's handler inside the sender's call.
     */
    static ChannelFactory inProcess(Executor executor, int maxMessageBytes) {
        return new ChannelFactory() {
            @Override
            public ManagedChannel open(String peer, String target) {
                return InProcessChannelBuilder.forName(target).executor(executor).maxInboundMessageSize(maxMessageBytes).build();
            }

            @Override
            public boolean copiesPayloads() {
                return true;
            }
        };
    }
}
