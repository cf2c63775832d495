package io.pagewire.node.cluster;

import static io.pagewire.node.TestData.pattern;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.ReceiveRequest;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * With 5% loss, duplication and reordering injected on every link, 10,000 writes with notifications
 * land every byte exactly once, and the notifications arrive in order, each after its data; 10,000
 * SENDs land exactly once, in order, each in the next posted receive, while the receiver keeps too
 * few receives posted (RNR, then retry).
 */
abstract class LossyFabricSuite extends ClusterFixture {
    private static final int WRITES = 10_000;
    private static final int SLOT = 256;
    private static final int POST_BATCH = 100;

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void everyByteLandsOnceAndNotificationsComeInOrder(RegistrationMode mode) throws Exception {
        start(2, context -> {
            context.fabric().lossRate(0.05).duplicateRate(0.05).reorderRate(0.05).faultSeed(context.nodeId().hashCode());
            context.nic().ackTimeoutNs(10_000_000L).retryCount(50);
        });
        Connection c = connect(cluster.node(1), cluster.node(2));
        long length = (long) WRITES * SLOT;
        long src = c.local().space().allocate(length);
        long dst = c.remote().space().allocate(length);
        MemoryRegion srcRegion = c.local().register(src, length, mode, Access.all());
        MemoryRegion dstRegion = c.remote().register(dst, length, mode, Access.all());
        for (int i = 0; i < WRITES; i++) {
            c.local().space().store(src + (long) i * SLOT, slot(i), 0, SLOT);
        }

        EventCounter counter = c.remote().createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        AtomicLong lastSeen = new AtomicLong();
        ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        counter.addHandler(value -> {
            if (value != lastSeen.get() + 1) {
                violations.add("notification " + value + " after " + lastSeen.get());
            }
            lastSeen.set(value);
            // Notification k is for write k-1, whose data must already be visible.
            byte[] landed = new byte[SLOT];
            c.remote().space().load(dst + (value - 1) * SLOT, landed, 0, SLOT);
            if (ByteBuffer.wrap(landed).getLong() != value - 1) {
                violations.add("notification " + value + " came before its data");
            }
        });

        postAllAndAwaitInOrder(c, i -> WorkRequest.writeWithNotify(i, srcRegion.lkey(), src + (long) i * SLOT, SLOT, dst + (long) i * SLOT,
                dstRegion.rkey(), counter.id()));
        assertThat(counter.await(WRITES, 30, TimeUnit.SECONDS)).as("notifications, exactly one per write").isEqualTo(WRITES);
        assertThat(violations).isEmpty();
        for (int i = 0; i < WRITES; i++) {
            byte[] landed = new byte[SLOT];
            c.remote().space().load(dst + (long) i * SLOT, landed, 0, SLOT);
            assertThat(landed).as("slot %d", i).isEqualTo(slot(i));
        }
        assertThat(cluster.node(1).fabric().faults().dropped()).as("loss was injected").isPositive();
        assertThat(cluster.node(1).nic().counters().get(NicCounter.RETRANSMITTED_PACKETS)).isPositive();
        assertThat(cluster.node(2).nic().counters().get(NicCounter.DUPLICATE_PACKETS)).isPositive();
        assertThat(cluster.node(2).nic().counters().get(NicCounter.NOTIFICATIONS_DELIVERED)).isEqualTo(WRITES);
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void sendsLandOnceInOrderInTheNextPostedReceiveEvenWhenReceivesRunShort(RegistrationMode mode) throws Exception {
        start(2, context -> {
            context.fabric().lossRate(0.05).duplicateRate(0.05).reorderRate(0.05).faultSeed(context.nodeId().hashCode() + 1);
            context.nic().ackTimeoutNs(10_000_000L).retryCount(50).rnrDelayNs(200_000L).rnrRetryCount(7);
        });
        Connection c = connect(cluster.node(1), cluster.node(2));
        long length = (long) WRITES * SLOT;
        long src = c.local().space().allocate(length);
        MemoryRegion srcRegion = c.local().register(src, length, mode, Access.all());
        for (int i = 0; i < WRITES; i++) {
            c.local().space().store(src + (long) i * SLOT, slot(i), 0, SLOT);
        }
        // Fewer receive buffers than SENDs in flight: the receiver reposts each one after checking it.
        int buffers = POST_BATCH / 2;
        long dst = c.remote().space().allocate((long) buffers * SLOT);
        MemoryRegion dstRegion = c.remote().register(dst, (long) buffers * SLOT, mode, Access.all());
        for (int b = 0; b < buffers; b++) {
            c.remoteQp().postReceive(new ReceiveRequest(b, dstRegion.lkey(), dst + (long) b * SLOT, SLOT));
        }
        ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        Thread receiver = new Thread(() -> {
            try {
                for (int i = 0; i < WRITES; i++) {
                    Completion r = awaitSuccess(c.remoteCq());
                    // Receives are consumed in posting order: message i lands in buffer i mod buffers.
                    if (r.wrId() != i % buffers || r.bytes() != SLOT) {
                        violations.add("message " + i + " completed receive " + r.wrId() + " with " + r.bytes() + " bytes");
                    }
                    long at = dst + (long) (i % buffers) * SLOT;
                    byte[] landed = new byte[SLOT];
                    c.remote().space().load(at, landed, 0, SLOT);
                    if (ByteBuffer.wrap(landed).getLong() != i) {
                        violations.add("message " + i + " found message " + ByteBuffer.wrap(landed).getLong() + " in its buffer");
                    }
                    if (i % 997 == 0) {
                        Thread.sleep(2); // now and then the application falls behind and receives run out
                    }
                    c.remoteQp().postReceive(new ReceiveRequest(i % buffers, dstRegion.lkey(), at, SLOT));
                }
            } catch (Throwable e) {
                violations.add("receiver: " + e);
            }
        }, "lossy-receiver");
        receiver.start();
        postAllAndAwaitInOrder(c, i -> WorkRequest.send(i, srcRegion.lkey(), src + (long) i * SLOT, SLOT));
        receiver.join(60_000);
        assertThat(receiver.isAlive()).as("the receiver saw every message").isFalse();
        assertThat(violations).isEmpty();
        assertThat(c.remoteCq().poll()).as("exactly one receive completion per SEND").isNull();
        assertThat(cluster.node(2).nic().counters().get(NicCounter.RECEIVES_COMPLETED)).isEqualTo(WRITES);
        assertThat(cluster.node(2).nic().counters().get(NicCounter.NO_RECEIVE_RNR_NAKS_SENT)).as("receives ran short").isPositive();
        assertThat(cluster.node(1).fabric().faults().dropped()).as("loss was injected").isPositive();
        assertThat(cluster.node(2).nic().counters().get(NicCounter.DUPLICATE_PACKETS)).isPositive();
    }

    /** Posts request i for i below WRITES in batches, two batches ahead of the completions, which must come in posting order. */
    private void postAllAndAwaitInOrder(Connection c, java.util.function.IntFunction<WorkRequest> request) throws InterruptedException {
        for (int first = 0; first < WRITES; first += POST_BATCH) {
            List<WorkRequest> batch = new ArrayList<>();
            for (int i = first; i < first + POST_BATCH; i++) {
                batch.add(request.apply(i));
            }
            c.qp().post(batch);
            if (first >= 2 * POST_BATCH) {
                for (int i = 0; i < POST_BATCH; i++) {
                    assertThat(awaitSuccess(c.cq()).wrId()).isEqualTo(first - 2L * POST_BATCH + i);
                }
            }
        }
        for (long expected = WRITES - 2L * POST_BATCH; expected < WRITES; expected++) {
            assertThat(awaitSuccess(c.cq()).wrId()).as("completions in posting order").isEqualTo(expected);
        }
    }

    /** Slot i: its index, then bytes derived from it. */
    private static byte[] slot(int i) {
        byte[] bytes = pattern(i, SLOT);
        ByteBuffer.wrap(bytes).putLong(i);
        return bytes;
    }
}
