package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.QueuePairEvent;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.Retries;
import io.pagewire.client.WorkRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The queue pair states of ibv_modify_qp as a Java application drives them over the SDK, between two
 * nodes: ERROR flushes every future in order, RESET connects again, a drain says when it is done, and a
 * pair's own retries end a request to a peer that never answers.
 */
@Timeout(value = 2, unit = TimeUnit.MINUTES)
class QueuePairStatesSdkTest extends SdkFixture {
    private static final int SIZE = 1 << 16;

    @Test
    void errorFlushesResetReconnectsAndADrainSaysWhenItIsDone() throws Exception {
        start(2, c -> { });
        Endpoint a = connect(cluster.node(1)).openEndpoint("states-a");
        Endpoint b = connect(cluster.node(2)).openEndpoint("states-b");
        long src = a.allocate(SIZE);
        long dst = b.allocate(SIZE);
        MemoryRegion from = a.register(src, SIZE, RegistrationMode.PINNED, Access.all());
        MemoryRegion to = b.register(dst, SIZE, RegistrationMode.PINNED, Access.all());
        QueuePair qa = a.createQueuePair();
        QueuePair qb = b.createQueuePair();
        BlockingQueue<QueuePairEvent> events = new LinkedBlockingQueue<>();
        qa.onEvent(events::add);
        // qb never connects: qa's writes reach a pair that drops them, and stay outstanding
        qa.connect(qb.address());
        List<CompletableFuture<Completion>> writes = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            writes.add(qa.write(from, src, 4096, dst, to.rkey()));
        }
        CompletableFuture<Completion> receive = qa.postReceive(from, src, 64);
        qa.moveToError();
        for (CompletableFuture<Completion> w : writes) {
            assertThatThrownBy(() -> qa.await(w)).isInstanceOf(PagewireException.FlushedException.class);
        }
        assertThatThrownBy(() -> qa.await(receive)).isInstanceOf(PagewireException.FlushedException.class);

        qa.reset();
        qa.connect(qb.address());
        qb.connect(qa.address());
        assertThat(qa.await(qa.write(from, src, SIZE, dst, to.rkey())).bytes()).isEqualTo(SIZE);

        CompletableFuture<Completion> last = qa.write(from, src, SIZE, dst, to.rkey());
        qa.drainSendQueue();
        assertThat(events.poll(10, TimeUnit.SECONDS)).isEqualTo(QueuePairEvent.SEND_QUEUE_DRAINED);
        qa.await(last);
        CompletableFuture<Completion> held = qa.post(List.of(WorkRequest.write(from, src, 64, dst, to.rkey()).fenced())).get(0);
        Thread.sleep(200);
        assertThat(held).as("a request posted during a drain waits for RTS").isNotDone();
        qa.resumeSending();
        qa.await(held);
    }

    @Test
    void aPairsOwnRetriesEndARequestToASilentPeer() throws Exception {
        start(2, c -> c.nic().minAckTimeoutNs(5_000_000));
        Endpoint a = connect(cluster.node(1)).openEndpoint("retries-a");
        Endpoint b = connect(cluster.node(2)).openEndpoint("retries-b");
        long src = a.allocate(SIZE);
        long dst = b.allocate(SIZE);
        MemoryRegion from = a.register(src, SIZE, RegistrationMode.PINNED, Access.all());
        MemoryRegion to = b.register(dst, SIZE, RegistrationMode.PINNED, Access.all());
        QueuePair qa = a.createQueuePair();
        QueuePair silent = b.createQueuePair(); // never connected: it drops what arrives
        BlockingQueue<QueuePairEvent> events = new LinkedBlockingQueue<>();
        qa.onEvent(events::add);
        qa.connect(silent.address(), new Retries(Duration.ofMillis(5), 1, Retries.FOREVER, Duration.ofMillis(1)));
        long start = System.nanoTime();
        CompletableFuture<Completion> write = qa.write(from, src, 64, dst, to.rkey());
        assertThatThrownBy(() -> qa.await(write)).isInstanceOf(PagewireException.RetryExceededException.class)
                .hasMessageContaining("after 1 retransmissions");
        assertThat(Duration.ofNanos(System.nanoTime() - start)).as("two timeouts of 5-10 ms, not seven of 200-800 ms")
                .isLessThan(Duration.ofSeconds(5));
        assertThat(events.poll(10, TimeUnit.SECONDS)).isEqualTo(QueuePairEvent.FATAL);
    }
}
