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
     * Whether a batch must be copied before it is handed to a stream: the in-process transport passes
     * the message's stream to the other side unread, to be read after the send returns (and after the
     * NIC reused the batch's slots and payload arrays).
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
                // No retries: a lane recovers from loss itself, and a retriable stream would keep each message
                // for replay (and serialise it later), where the NIC reuses a batch once its send returns.
                return builder
                        .eventLoopGroup(loops)
                        .channelType(channelType)
                        .directExecutor()
                        .disableRetry()
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
                return InProcessChannelBuilder.forName(target).executor(executor).maxInboundMessageSize(maxMessageBytes).disableRetry().build();
            }

            @Override
            public boolean copiesPayloads() {
                return true;
            }
        };
    }
}
