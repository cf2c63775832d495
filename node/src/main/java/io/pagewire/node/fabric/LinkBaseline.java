package io.pagewire.node.fabric;

import com.google.protobuf.ByteString;
import io.grpc.Channel;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.pagewire.proto.baseline.BaselineAck;
import io.pagewire.proto.baseline.BaselineChunk;
import io.pagewire.proto.baseline.LinkBaselineGrpc;
import io.pagewire.proto.baseline.RunBaselineRequest;
import io.pagewire.proto.baseline.RunBaselineResponse;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.HdrHistogram.Histogram;

/**
 * The link baseline: raw bytes over a plain gRPC stream to a peer, on the fabric's own channel to
 * it and with the lanes' settings (direct executor, flow-control window, on-ready threshold), so a
 * Pagewire figure can be printed beside the link's in the same run. It serves the peer-facing
 * {@code Sink} and {@code Echo} streams and the application's {@code Run}.
 *
 * <p>Both measurements are driven from gRPC's callbacks on the transport thread, as the lanes are:
 * bandwidth sends while the stream is ready and resumes in its on-ready handler; the ping-pong sends
 * the next ping from the callback that received the previous pong.
 */
public final class LinkBaseline extends LinkBaselineGrpc.LinkBaselineImplBase {
    /** A run may not take longer than this, whatever its count. */
    private static final long RUN_LIMIT_NS = TimeUnit.MINUTES.toNanos(10);
    private static final int MAX_SIZE = 16 << 20;

    private final Fabric fabric;

    public LinkBaseline(Fabric fabric) {
        this.fabric = fabric;
    }

    // ---- the peer's ends ------------------------------------------------------------------------

    @Override
    public StreamObserver<BaselineChunk> sink(StreamObserver<BaselineAck> responses) {
        long[] received = new long[1];
        return new Answering<>(responses, chunk -> {
            received[0]++;
            boolean due = chunk.getLast() || (chunk.getAckEvery() > 0 && received[0] % chunk.getAckEvery() == 0);
            return due ? BaselineAck.newBuilder().setChunks(received[0]).build() : null;
        });
    }

    @Override
    public StreamObserver<BaselineChunk> echo(StreamObserver<BaselineChunk> responses) {
        return new Answering<>(responses, chunk -> chunk);
    }

    /** The peer's end of a baseline stream: each chunk may be answered (null: no answer); the stream ends with the caller's. */
    private static final class Answering<A> implements StreamObserver<BaselineChunk> {
        private final StreamObserver<A> responses;
        private final Function<BaselineChunk, A> answer;

        Answering(StreamObserver<A> responses, Function<BaselineChunk, A> answer) {
            this.responses = responses;
            this.answer = answer;
        }

        @Override
        public void onNext(BaselineChunk chunk) {
            A reply = answer.apply(chunk);
            if (reply != null) {
                responses.onNext(reply);
            }
        }

        @Override
        public void onError(Throwable t) {
            // The sender went away; nothing to clean up.
        }

        @Override
        public void onCompleted() {
            responses.onCompleted();
        }
    }

    // ---- the application's request ------------------------------------------------------------

    @Override
    public void run(RunBaselineRequest request, StreamObserver<RunBaselineResponse> response) {
        try {
            response.onNext(measure(request));
            response.onCompleted();
        } catch (IllegalArgumentException e) {
            response.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
        } catch (IllegalStateException e) {
            response.onError(Status.UNAVAILABLE.withDescription(e.getMessage()).asRuntimeException());
        }
    }

    /** Runs one measurement to a peer and waits for its figures. */
    public RunBaselineResponse measure(RunBaselineRequest request) {
        if (request.getSize() < 1 || request.getSize() > MAX_SIZE) {
            throw new IllegalArgumentException("size must be 1 to " + MAX_SIZE + " bytes, was " + request.getSize());
        }
        if (request.getCount() < 1) {
            throw new IllegalArgumentException("count must be at least 1");
        }
        Channel channel = fabric.channelTo(request.getPeer());
        if (channel == null) {
            throw new IllegalArgumentException("node " + fabric.nodeId() + " has no link to a peer called '" + request.getPeer()
                    + "'; its peers are " + fabric.links().keySet());
        }
        LinkBaselineGrpc.LinkBaselineStub stub = LinkBaselineGrpc.newStub(channel)
                .withOnReadyThreshold(fabric.context().onReadyThresholdBytes());
        ByteString payload = ByteString.copyFrom(new byte[request.getSize()]);
        switch (request.getKind()) {
            case BANDWIDTH -> {
                if (request.getWarmupNs() > 0) {
                    await(new Bandwidth(stub, payload, Long.MAX_VALUE, request.getWarmupNs()).start());
                }
                return await(new Bandwidth(stub, payload, request.getCount(), request.getDurationNs()).start());
            }
            case PING_PONG -> {
                return await(new PingPong(stub, payload, request.getCount(), request.getWarmup()).start());
            }
            default -> throw new IllegalArgumentException("kind must be BANDWIDTH or PING_PONG, was " + request.getKind());
        }
    }

    private static RunBaselineResponse await(CompletableFuture<RunBaselineResponse> run) {
        try {
            return run.get(RUN_LIMIT_NS, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while the baseline ran", e);
        } catch (ExecutionException e) {
            throw new IllegalStateException("the baseline stream failed: " + e.getCause().getMessage(), e.getCause());
        } catch (TimeoutException e) {
            run.cancel(true);
            throw new IllegalStateException("the baseline did not finish within " + TimeUnit.NANOSECONDS.toSeconds(RUN_LIMIT_NS) + " s", e);
        }
    }

    /** Streams chunks to the sink while the stream is ready; done when the sink acknowledges the last. */
    private static final class Bandwidth implements ClientResponseObserver<BaselineChunk, BaselineAck> {
        private final LinkBaselineGrpc.LinkBaselineStub stub;
        private final BaselineChunk chunk;
        private final BaselineChunk lastChunk;
        private final long count;
        private final long durationNs;
        private final CompletableFuture<RunBaselineResponse> done = new CompletableFuture<>();
        private ClientCallStreamObserver<BaselineChunk> requests;
        private long sent;
        private boolean lastSent;
        private long startNs;

        Bandwidth(LinkBaselineGrpc.LinkBaselineStub stub, ByteString payload, long count, long durationNs) {
            this.stub = stub;
            this.chunk = BaselineChunk.newBuilder().setPayload(payload).build();
            this.lastChunk = BaselineChunk.newBuilder().setPayload(payload).setLast(true).build();
            this.count = count;
            this.durationNs = durationNs;
        }

        CompletableFuture<RunBaselineResponse> start() {
            startNs = System.nanoTime();
            stub.sink(this);
            return done;
        }

        @Override
        public void beforeStart(ClientCallStreamObserver<BaselineChunk> stream) {
            requests = stream;
            // The handler may run before the call is fully started (the onReady race); pump checks readiness itself.
            stream.setOnReadyHandler(this::pump);
        }

        private synchronized void pump() {
            while (!lastSent && requests.isReady()) {
                boolean last = sent == count - 1 || (durationNs > 0 && System.nanoTime() - startNs >= durationNs);
                requests.onNext(last ? lastChunk : chunk);
                sent++;
                if (last) {
                    lastSent = true;
                    requests.onCompleted();
                }
            }
        }

        @Override
        public void onNext(BaselineAck ack) {
            if (ack.getChunks() >= sent && lastSent) {
                done.complete(RunBaselineResponse.newBuilder().setCount(ack.getChunks()).setElapsedNs(System.nanoTime() - startNs).build());
            }
        }

        @Override
        public void onError(Throwable t) {
            done.completeExceptionally(t);
        }

        @Override
        public void onCompleted() {
            done.completeExceptionally(new IllegalStateException("the sink ended the stream before acknowledging the last chunk"));
        }
    }

    /** One ping in flight: each pong, on the transport thread, records its round trip and sends the next ping. */
    private static final class PingPong implements ClientResponseObserver<BaselineChunk, BaselineChunk> {
        private final LinkBaselineGrpc.LinkBaselineStub stub;
        private final BaselineChunk ping;
        private final long count;
        private final long warmup;
        private final Histogram histogram = new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
        private final CompletableFuture<RunBaselineResponse> done = new CompletableFuture<>();
        private ClientCallStreamObserver<BaselineChunk> requests;
        private long pongs;
        private long sentNs;
        private long measuredStartNs;

        PingPong(LinkBaselineGrpc.LinkBaselineStub stub, ByteString payload, long count, long warmup) {
            this.stub = stub;
            this.ping = BaselineChunk.newBuilder().setPayload(payload).build();
            this.count = count;
            this.warmup = warmup;
        }

        CompletableFuture<RunBaselineResponse> start() {
            stub.echo(this);
            send();
            return done;
        }

        @Override
        public void beforeStart(ClientCallStreamObserver<BaselineChunk> stream) {
            requests = stream;
        }

        private void send() {
            sentNs = System.nanoTime();
            if (pongs == warmup) {
                measuredStartNs = sentNs;
            }
            requests.onNext(ping);
        }

        @Override
        public void onNext(BaselineChunk pong) {
            long now = System.nanoTime();
            pongs++;
            if (pongs > warmup) {
                histogram.recordValue(Math.min(now - sentNs, histogram.getHighestTrackableValue()));
            }
            if (pongs < warmup + count) {
                send();
                return;
            }
            requests.onCompleted();
            done.complete(RunBaselineResponse.newBuilder()
                    .setCount(histogram.getTotalCount())
                    .setElapsedNs(now - measuredStartNs)
                    .setMinNs(histogram.getMinValue())
                    .setP50Ns(histogram.getValueAtPercentile(50))
                    .setP99Ns(histogram.getValueAtPercentile(99))
                    .setP999Ns(histogram.getValueAtPercentile(99.9))
                    .setMaxNs(histogram.getMaxValue())
                    .setMeanNs(histogram.getMean())
                    .build());
        }

        @Override
        public void onError(Throwable t) {
            done.completeExceptionally(t);
        }

        @Override
        public void onCompleted() {
            if (!done.isDone()) {
                done.completeExceptionally(new IllegalStateException("the echo ended the stream after " + pongs + " pongs"));
            }
        }
    }
}
