package io.pagewire.node.cli;

import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import io.pagewire.proto.baseline.LinkBaselineGrpc;
import io.pagewire.proto.baseline.RunBaselineRequest;
import io.pagewire.proto.baseline.RunBaselineResponse;
import io.pagewire.proto.verbs.DescribeNodeRequest;
import io.pagewire.proto.verbs.DescribeNodeResponse;
import io.pagewire.proto.verbs.VerbsGrpc;
import java.util.concurrent.TimeUnit;

/**
 * What the benchmarks ask a node besides the SDK's calls: its identity and CPU time, and a link
 * baseline run from it to a peer. One plain gRPC channel per node.
 */
final class NodeProbe implements AutoCloseable {
    private final String target;
    private final ManagedChannel channel;

    NodeProbe(String target) {
        this.target = target;
        this.channel = NettyChannelBuilder.forTarget(target).usePlaintext().build();
    }

    DescribeNodeResponse describe() {
        try {
            return VerbsGrpc.newBlockingStub(channel).withDeadlineAfter(30, TimeUnit.SECONDS).describeNode(DescribeNodeRequest.getDefaultInstance());
        } catch (StatusRuntimeException e) {
            throw new IllegalStateException("node at " + target + " did not describe itself: " + e.getStatus(), e);
        }
    }

    /** CPU time the node's process has used so far. */
    long cpuNs() {
        return describe().getProcessCpuNs();
    }

    /** Runs the raw gRPC baseline from this node to {@code peer} (a node id). */
    RunBaselineResponse baseline(RunBaselineRequest.Kind kind, String peer, int size, long count, long warmup, long warmupNs,
            long durationNs) {
        try {
            return LinkBaselineGrpc.newBlockingStub(channel).withDeadlineAfter(15, TimeUnit.MINUTES).run(RunBaselineRequest.newBuilder()
                    .setKind(kind).setPeer(peer).setSize(size).setCount(count).setWarmup(warmup).setWarmupNs(warmupNs).setDurationNs(durationNs).build());
        } catch (StatusRuntimeException e) {
            throw new IllegalStateException("the gRPC baseline from " + target + " to " + peer + " failed: " + e.getStatus(), e);
        }
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
