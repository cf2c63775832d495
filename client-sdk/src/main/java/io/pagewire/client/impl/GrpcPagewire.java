package io.pagewire.client.impl;

import io.grpc.Channel;
import io.grpc.ClientInterceptors;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.TlsChannelCredentials;
import io.grpc.stub.MetadataUtils;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.PagewireException;
import java.io.IOException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.NodeInfo;
import io.pagewire.client.Pagewire;
import io.pagewire.client.RegionStats;
import io.pagewire.client.RegistrationMode;
import io.pagewire.proto.verbs.DescribeNodeRequest;
import io.pagewire.proto.verbs.DescribeNodeResponse;
import io.pagewire.proto.verbs.ReadStatsRequest;
import io.pagewire.proto.verbs.ReadStatsResponse;
import io.pagewire.proto.verbs.VerbsGrpc;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/** {@link Pagewire} over gRPC: one channel to one node's verbs service. */
public final class GrpcPagewire implements Pagewire {
    /** How {@link Pagewire#connect} finds this implementation (registered in META-INF/services). */
    public static final class Provider implements Pagewire.Provider {
        @Override
        public Pagewire connect(String target, ConnectOptions options) {
            return GrpcPagewire.connect(target, options);
        }

        @Override
        public Pagewire over(Channel channel, ConnectOptions options) {
            return GrpcPagewire.over(channel, options);
        }
    }

    private final Channel channel;
    private final ManagedChannel owned;
    private final ConnectOptions options;
    private final String target;
    private final List<GrpcEndpoint> endpoints = new CopyOnWriteArrayList<>();

    private GrpcPagewire(Channel channel, ManagedChannel owned, ConnectOptions options, String target) {
        this.channel = channel;
        this.owned = owned;
        this.options = options;
        this.target = target;
    }

    /**
     * Opens a channel to "host:port", over mutual TLS when the options' security has certificates;
     * with busy polling, callbacks run on the transport thread.
     */
    public static GrpcPagewire connect(String target, ConnectOptions options) {
        NettyChannelBuilder builder = channelBuilder(target, options.security()).maxInboundMessageSize(64 << 20)
                .keepAliveTime(30, TimeUnit.SECONDS);
        if (options.busyPoll()) {
            builder.directExecutor();
        }
        ManagedChannel channel = builder.build();
        return new GrpcPagewire(withToken(channel, options.security()), channel, options, target);
    }

    /**
     * A channel builder for a node at "host:port": mutual TLS with the security's certificates (the
     * node's own certificate checked against its server name, else the address), or plaintext. Tools
     * that call a node's other services (health, the link baseline) build their channels here too.
     */
    public static NettyChannelBuilder channelBuilder(String target, ClientSecurity security) {
        if (!security.tls()) {
            return NettyChannelBuilder.forTarget(target).usePlaintext();
        }
        NettyChannelBuilder builder;
        try {
            builder = NettyChannelBuilder.forTarget(target, TlsChannelCredentials.newBuilder()
                    .keyManager(security.certificateFile().toFile(), security.privateKeyFile().toFile())
                    .trustManager(security.trustedCaFile().toFile()).build());
        } catch (IOException e) {
            throw new PagewireException("cannot read the TLS files of " + security + ": " + e.getMessage(), e);
        }
        if (security.serverName() != null) {
            builder.overrideAuthority(security.serverName());
        }
        return builder;
    }

    public static GrpcPagewire over(Channel channel, ConnectOptions options) {
        return new GrpcPagewire(withToken(channel, options.security()), null, options, channel.authority());
    }

    /** Sends the application token, if there is one, in every call's {@code authorization} header. */
    public static Channel withToken(Channel channel, ClientSecurity security) {
        if (security.token().isEmpty()) {
            return channel;
        }
        Metadata headers = new Metadata();
        headers.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + security.token());
        return ClientInterceptors.intercept(channel, MetadataUtils.newAttachHeadersInterceptor(headers));
    }

    VerbsGrpc.VerbsStub stub() {
        return VerbsGrpc.newStub(channel).withDeadlineAfter(options.deadline().toMillis(), TimeUnit.MILLISECONDS);
    }

    /** A stub for the session stream, which has no deadline: it lives as long as the endpoint. */
    VerbsGrpc.VerbsStub sessionStub() {
        return VerbsGrpc.newStub(channel);
    }

    ConnectOptions options() {
        return options;
    }

    String target() {
        return target;
    }

    <T> T join(CompletableFuture<T> future) {
        return Errors.join(future, false, target);
    }

    @Override
    public NodeInfo node() {
        DescribeNodeResponse r = join(Calls.unary(o -> stub().describeNode(DescribeNodeRequest.getDefaultInstance(), o)));
        return new NodeInfo(r.getNodeId(), r.getPageSize(), r.getMtu(), List.copyOf(r.getPeersList()), r.getPhysicalMemoryBytes());
    }

    @Override
    public Endpoint openEndpoint(String name) {
        return join(openEndpointAsync(name));
    }

    @Override
    public CompletableFuture<Endpoint> openEndpointAsync(String name) {
        GrpcEndpoint endpoint = new GrpcEndpoint(this, name);
        endpoints.add(endpoint);
        return endpoint.opened().thenApply(e -> (Endpoint) e).whenComplete((e, error) -> {
            if (error != null) {
                endpoints.remove(endpoint);
            }
        });
    }

    void forget(GrpcEndpoint endpoint) {
        endpoints.remove(endpoint);
    }

    @Override
    public Map<String, Map<String, Double>> stats() {
        Map<String, Map<String, Double>> out = new LinkedHashMap<>();
        for (Stat stat : statList()) {
            String tags = stat.tags().entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).collect(Collectors.joining(","));
            out.computeIfAbsent(stat.name(), n -> new LinkedHashMap<>()).put(tags, stat.value());
        }
        return out;
    }

    @Override
    public List<Stat> statList() {
        ReadStatsResponse r = join(Calls.unary(o -> stub().readStats(ReadStatsRequest.getDefaultInstance(), o)));
        List<Stat> stats = new ArrayList<>(r.getStatsCount());
        r.getStatsList().forEach(s -> stats.add(new Stat(s.getName(), Map.copyOf(s.getTagsMap()), s.getValue(), s.getHelp(), s.getCounter())));
        return stats;
    }

    @Override
    public List<RegionStats> regionStats() {
        ReadStatsResponse r = join(Calls.unary(o -> stub().readStats(ReadStatsRequest.newBuilder().setRegions(true).build(), o)));
        List<RegionStats> regions = new ArrayList<>(r.getRegionsCount());
        r.getRegionsList().forEach(s -> regions.add(regionStats(s)));
        return regions;
    }

    static RegionStats regionStats(io.pagewire.proto.verbs.RegionStats s) {
        return new RegionStats(s.getEndpointId(), s.getLkey(), s.getAddress(), s.getLength(), RegistrationMode.valueOf(s.getMode().name()),
                s.getMinorFaults(), s.getMajorFaults(), s.getInvalidations(), s.getPrefetchedPages(), s.getPins(), s.getBytesReceived(),
                s.getBytesSent());
    }

    @Override
    public void close() {
        for (GrpcEndpoint endpoint : List.copyOf(endpoints)) {
            endpoint.close();
        }
        if (owned != null) {
            owned.shutdown();
            try {
                if (!owned.awaitTermination(5, TimeUnit.SECONDS)) {
                    owned.shutdownNow();
                }
            } catch (InterruptedException e) {
                owned.shutdownNow();
                Thread.currentThread().interrupt();
            }
        }
    }
}
