package io.pagewire.tools.perf;

import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.impl.GrpcPagewire;
import io.pagewire.proto.baseline.LinkBaselineGrpc;
import io.pagewire.proto.baseline.RunBaselineRequest;
import io.pagewire.proto.baseline.RunBaselineResponse;
import io.pagewire.proto.verbs.DescribeNodeRequest;
import io.pagewire.proto.verbs.DescribeNodeResponse;
import io.pagewire.proto.verbs.VerbsGrpc;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * What the benchmarks ask a node besides the SDK's calls: its identity and CPU time, and a link
 * baseline run from it to a peer. One gRPC channel per node, secured as the SDK's.
 */
public final class NodeProbe implements AutoCloseable {
    private final String target;
    private final ManagedChannel channel;
    private final io.grpc.Channel calls;

    public NodeProbe(String target, ClientSecurity security) {
        this.target = target;
        this.channel = GrpcPagewire.channelBuilder(target, security).build();
        this.calls = GrpcPagewire.withToken(channel, security);
    }

    public DescribeNodeResponse describe() {
        try {
            return VerbsGrpc.newBlockingStub(calls).withDeadlineAfter(30, TimeUnit.SECONDS).describeNode(DescribeNodeRequest.getDefaultInstance());
        } catch (StatusRuntimeException e) {
            throw new IllegalStateException("node at " + target + " did not describe itself: " + e.getStatus(), e);
        }
    }

    /** CPU time the node's process has used so far. */
    public long cpuNs() {
        return describe().getProcessCpuNs();
    }

    /** Runs the raw gRPC baseline from this node to {@code peer} (a node id). */
    RunBaselineResponse baseline(RunBaselineRequest.Kind kind, String peer, int size, long count, long warmup, long warmupNs,
            long durationNs) {
        try {
            return LinkBaselineGrpc.newBlockingStub(calls).withDeadlineAfter(15, TimeUnit.MINUTES).run(RunBaselineRequest.newBuilder()
                    .setKind(kind).setPeer(peer).setSize(size).setCount(count).setWarmup(warmup).setWarmupNs(warmupNs).setDurationNs(durationNs).build());
        } catch (StatusRuntimeException e) {
            throw new IllegalStateException("the gRPC baseline from " + target + " to " + peer + " failed: " + e.getStatus(), e);
        }
    }

    /**
     * The raw gRPC stream's bandwidth from this node to {@code peer}, as a perf row: its CPU is what
     * {@code cpu} (the processes involved) counted while it ran. The warm-up is a run of its own, so
     * its CPU is not charged to the measured bytes.
     */
    public Perftest.BandwidthRow linkBandwidth(String peer, int size, long count, long warmupNs, long durationNs,
            LongSupplier cpu) {
        if (warmupNs > 0) {
            baseline(RunBaselineRequest.Kind.BANDWIDTH, peer, size, Long.MAX_VALUE, 0, 0, warmupNs);
        }
        long cpuBefore = cpu.getAsLong();
        RunBaselineResponse b = baseline(RunBaselineRequest.Kind.BANDWIDTH, peer, size, count, 0, 0, durationNs);
        long cpuNs = cpu.getAsLong() - cpuBefore;
        double seconds = b.getElapsedNs() / 1e9;
        double mb = b.getCount() * (double) size / (1 << 20) / seconds;
        return new Perftest.BandwidthRow(size, b.getCount(), mb, mb, b.getCount() / seconds / 1e6, cpuNs);
    }

    /**
     * The raw gRPC ping-pong from this node to {@code peer}, as a perf row in microseconds; {@code halved}
     * reports half a round trip, as write_lat (like ib_write_lat) does.
     */
    public Perftest.LatencyRow linkPingPong(String peer, int size, long count, long warmup, boolean halved) {
        RunBaselineResponse b = baseline(RunBaselineRequest.Kind.PING_PONG, peer, size, count, warmup, 0, 0);
        double scale = halved ? 2000.0 : 1000.0;
        return new Perftest.LatencyRow(size, b.getCount(), b.getMinNs() / scale, b.getMaxNs() / scale, b.getP50Ns() / scale,
                b.getMeanNs() / scale, 0, b.getP99Ns() / scale, b.getP999Ns() / scale);
    }

    @Override
    public void close() {
        channel.shutdownNow();
        try {
            channel.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
