package io.pagewire.tools.experiment;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.WorkRequest;
import io.pagewire.tools.perf.Perftest;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.LongFunction;
import org.HdrHistogram.Histogram;

/**
 * Two applications' endpoints on two nodes of a running cluster, reached through the SDK, with a
 * queue pair between them and a pinned source buffer on the sending side: what an experiment's
 * workload runs over when it cannot reach into the nodes (the SDK's counterpart of {@link Link}).
 * Closing it closes both endpoints, and with them everything registered on them.
 */
final class ClusterLink implements AutoCloseable {
    private final Endpoint sender;
    private final Endpoint receiver;
    private final QueuePair qp;
    private final QueuePair receiverQp;
    private final MemoryRegion source;

    private ClusterLink(Endpoint sender, Endpoint receiver, QueuePair qp, QueuePair receiverQp, MemoryRegion source) {
        this.sender = sender;
        this.receiver = receiver;
        this.qp = qp;
        this.receiverQp = receiverQp;
        this.source = source;
    }

    /**
     * Opens an endpoint named {@code name} on each node, connects a queue pair between them and
     * registers a {@code sourceBytes} buffer on the sender, written so that it is resident.
     */
    static ClusterLink open(Pagewire from, Pagewire to, String name, int sourceBytes) {
        Endpoint sender = from.openEndpoint(name + "-sender");
        Endpoint receiver = null;
        try {
            receiver = to.openEndpoint(name + "-receiver");
            QueuePair qp = sender.createQueuePair();
            QueuePair receiverQp = receiver.createQueuePair();
            qp.connect(receiverQp.address());
            receiverQp.connect(qp.address());
            long address = sender.allocate(sourceBytes);
            Perftest.touch(sender, address, sourceBytes);
            return new ClusterLink(sender, receiver, qp, receiverQp, sender.register(address, sourceBytes, RegistrationMode.PINNED, Access.all()));
        } catch (RuntimeException e) {
            sender.close();
            if (receiver != null) {
                receiver.close();
            }
            throw e;
        }
    }

    /** The receiving application's endpoint, where the experiment's target memory lives. */
    Endpoint receiver() {
        return receiver;
    }

    /** The receiving end of the queue pair, where receives are posted for SENDs. */
    QueuePair receiverQueuePair() {
        return receiverQp;
    }

    /** The sender's buffer, the source of every write. */
    MemoryRegion source() {
        return source;
    }

    /**
     * Posts the requests {@code first} to {@code first + count - 1} that {@code request} builds, with
     * at most {@code depth} in flight, and waits for them all (RC completes them in order), requiring
     * each one's success within {@code timeoutSeconds}.
     *
     * @param who names the workload in a failure's message
     */
    void stream(long first, long count, int depth, LongFunction<WorkRequest> request, long timeoutSeconds, String who)
            throws InterruptedException {
        stream(first, count, depth, request, timeoutSeconds, who, null);
    }

    /**
     * As {@link #stream(long, long, int, LongFunction, long, String)}, recording each request's time
     * from post to completion in {@code latency} (when not null). Once the window is full it waits for
     * the oldest request, takes every later one that has completed too, and posts as many new ones in
     * one list, as an ibverbs loop posts a chain after polling a batch of completions.
     */
    void stream(long first, long count, int depth, LongFunction<WorkRequest> request, long timeoutSeconds, String who, Histogram latency)
            throws InterruptedException {
        ArrayDeque<CompletableFuture<Completion>> inFlight = new ArrayDeque<>(depth);
        ArrayDeque<Long> postedAt = new ArrayDeque<>(depth);
        List<WorkRequest> batch = new ArrayList<>(depth);
        long next = first;
        long end = first + count;
        while (next < end || !inFlight.isEmpty()) {
            if (inFlight.size() == depth || next == end) {
                reap(inFlight.poll(), postedAt.poll(), latency, timeoutSeconds, who);
                while (!inFlight.isEmpty() && inFlight.peek().isDone()) {
                    reap(inFlight.poll(), postedAt.poll(), latency, timeoutSeconds, who);
                }
            }
            batch.clear();
            for (; next < end && inFlight.size() + batch.size() < depth; next++) {
                batch.add(request.apply(next));
            }
            if (!batch.isEmpty()) {
                long now = System.nanoTime();
                for (CompletableFuture<Completion> posted : qp.post(batch)) {
                    inFlight.add(posted);
                    postedAt.add(now);
                }
            }
        }
    }

    private static void reap(CompletableFuture<Completion> done, long postedAt, Histogram latency, long timeoutSeconds, String who)
            throws InterruptedException {
        try {
            done.get(timeoutSeconds, TimeUnit.SECONDS);
            if (latency != null) {
                latency.recordValue(Math.max(0, System.nanoTime() - postedAt));
            }
        } catch (TimeoutException e) {
            throw new IllegalStateException(who + ": a request did not complete within " + timeoutSeconds + " s");
        } catch (ExecutionException e) {
            throw new IllegalStateException(who + ": a request failed: " + e.getCause().getMessage(), e.getCause());
        }
    }

    @Override
    public void close() {
        try {
            sender.close();
        } finally {
            receiver.close();
        }
    }
}
