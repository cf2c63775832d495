package io.pagewire.systemtests;

import static io.pagewire.node.TestData.pattern;
import static io.pagewire.systemtests.ClusterChecks.total;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.WorkRequest;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * With 5 % loss, duplication and reordering injected on every node's sends (node settings, so
 * containers get them too): writes with notifications complete in posting order, land every byte
 * exactly once, and the event counter the application watches never falls, is never seen before the
 * data it counts, and ends at one per write; SENDs land exactly once, in order, each in the next posted
 * receive, while the receiver keeps too few receives posted (RNR NAKs, then retries).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
abstract class LossyFabricSuite {
    private static final int WRITES = 10_000;
    private static final int SLOT = 256;
    private static final int POST_BATCH = 100;

    /** Every link drops, duplicates and reorders 5 % of batches; short timeouts so recovery is quick. */
    static ClusterSpec spec() {
        return ClusterSpec.nodes(2).set("pagewire.fabric.lossRate", "0.05").set("pagewire.fabric.duplicateRate", "0.05")
                .set("pagewire.fabric.reorderRate", "0.05").set("pagewire.fabric.faultSeed", "17")
                .set("pagewire.nic.ackTimeoutNs", "10ms").set("pagewire.nic.retryCount", "50");
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void everyByteLandsOnceAndTheCounterNeverFalls(RegistrationMode mode, PagewireCluster cluster) throws Exception {
        Pagewire node1 = cluster.node(1).connect();
        Pagewire node2 = cluster.node(2).connect();
        Endpoint local = node1.openEndpoint("lossy-" + mode);
        Endpoint remote = node2.openEndpoint("lossy-" + mode);
        double droppedBefore = total(node1, "pagewire_injected_faults_total");
        double retransmittedBefore = total(node1, "pagewire_retransmitted_packets_total");
        double duplicatesBefore = total(node2, "pagewire_duplicate_packets_total");
        long length = (long) WRITES * SLOT;
        long src = local.allocate(length);
        long dst = remote.allocate(length);
        ByteBuffer slots = ByteBuffer.allocate((int) length);
        for (int i = 0; i < WRITES; i++) {
            slots.put(slot(i));
        }
        local.store(src, slots.array());
        MemoryRegion srcRegion = local.register(src, length, mode, Access.all());
        MemoryRegion dstRegion = remote.register(dst, length, mode, Access.all());
        EventCounter counter = remote.createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        AtomicLong lastSeen = new AtomicLong();
        ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        AutoCloseable watch = counter.onChange(value -> {
            if (value < lastSeen.get()) {
                violations.add("counter fell from " + lastSeen.get() + " to " + value);
            }
            lastSeen.set(value);
            // Value v counts write v-1, whose data must be visible already (checked for every 50th value).
            if (value > 0 && value % 50 == 0 && ByteBuffer.wrap(remote.load(dst + (value - 1) * SLOT, Long.BYTES)).getLong() != value - 1) {
                violations.add("the counter reached " + value + " before write " + (value - 1) + "'s data was visible");
            }
        });
        QueuePair qp = local.connect(remote);

        List<CompletableFuture<Completion>> done = new ArrayList<>();
        for (int first = 0; first < WRITES; first += POST_BATCH) {
            List<WorkRequest> batch = new ArrayList<>();
            for (int i = first; i < first + POST_BATCH; i++) {
                batch.add(WorkRequest.writeWithNotify(srcRegion, src + (long) i * SLOT, SLOT, dst + (long) i * SLOT, dstRegion.rkey(),
                        counter.id()));
            }
            done.addAll(qp.post(batch));
            if (first >= 2 * POST_BATCH) {
                qp.await(done.get(first - POST_BATCH - 1));
            }
        }
        long previous = -1;
        for (int i = 0; i < WRITES; i++) {
            Completion c = qp.await(done.get(i));
            assertThat(c.bytes()).as("write %d", i).isEqualTo(SLOT);
            assertThat(c.wrId()).as("completions in posting order").isGreaterThan(previous);
            previous = c.wrId();
        }
        assertThat(counter.await(WRITES, Duration.ofSeconds(30))).as("notifications, exactly one per write").isEqualTo(WRITES);
        watch.close();
        assertThat(violations).isEmpty();
        byte[] landed = remote.load(dst, (int) length);
        for (int i = 0; i < WRITES; i++) {
            assertThat(ByteBuffer.wrap(landed, i * SLOT, SLOT)).as("slot %d", i).isEqualTo(ByteBuffer.wrap(slot(i)));
        }
        assertThat(total(node1, "pagewire_injected_faults_total") - droppedBefore).as("faults were injected").isPositive();
        assertThat(total(node1, "pagewire_retransmitted_packets_total") - retransmittedBefore).as("losses were repaired").isPositive();
        assertThat(total(node2, "pagewire_duplicate_packets_total") - duplicatesBefore).as("duplicates were recognised").isPositive();
        qp.close();
        local.close();
        remote.close();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void sendsLandOnceInOrderInTheNextPostedReceiveEvenWhenReceivesRunShort(RegistrationMode mode, PagewireCluster cluster)
            throws Exception {
        Pagewire node1 = cluster.node(1).connect();
        Pagewire node2 = cluster.node(2).connect();
        Endpoint local = node1.openEndpoint("lossy-sender-" + mode);
        Endpoint remote = node2.openEndpoint("lossy-receiver-" + mode);
        double noReceiveBefore = total(node2, "pagewire_receive_rnr_naks_sent_total", "cause=no_receive");
        double duplicatesBefore = total(node2, "pagewire_duplicate_packets_total");
        long length = (long) WRITES * SLOT;
        long src = local.allocate(length);
        ByteBuffer slots = ByteBuffer.allocate((int) length);
        for (int i = 0; i < WRITES; i++) {
            slots.put(slot(i));
        }
        local.store(src, slots.array());
        MemoryRegion srcRegion = local.register(src, length, mode, Access.all());
        // Fewer receive buffers than SENDs in flight: the receiver reposts each one after checking it.
        int buffers = POST_BATCH / 2;
        long dst = remote.allocate((long) buffers * SLOT);
        MemoryRegion dstRegion = remote.register(dst, (long) buffers * SLOT, mode, Access.all());
        QueuePair sender = local.createQueuePair();
        QueuePair receiver = remote.createQueuePair();
        sender.connect(receiver.address());
        receiver.connect(sender.address());
        ArrayDeque<CompletableFuture<Completion>> posted = new ArrayDeque<>();
        for (int b = 0; b < buffers; b++) {
            posted.add(receiver.postReceive(dstRegion, dst + (long) b * SLOT, SLOT));
        }
        ConcurrentLinkedQueue<String> violations = new ConcurrentLinkedQueue<>();
        Thread receiving = new Thread(() -> {
            try {
                for (int i = 0; i < WRITES; i++) {
                    Completion r = receiver.await(posted.poll());
                    long at = dst + (long) (i % buffers) * SLOT;
                    long found = ByteBuffer.wrap(remote.load(at, Long.BYTES)).getLong();
                    // Receives are consumed in posting order: message i lands in buffer i mod buffers.
                    if (r.bytes() != SLOT || found != i) {
                        violations.add("message " + i + " completed with " + r.bytes() + " bytes and found message " + found + " in its buffer");
                    }
                    if (i % 997 == 0) {
                        Thread.sleep(2); // now and then the application falls behind and receives run out
                    }
                    posted.add(receiver.postReceive(dstRegion, at, SLOT));
                }
            } catch (Throwable e) {
                violations.add("receiver: " + e);
            }
        }, "lossy-receiver");
        receiving.start();
        List<CompletableFuture<Completion>> sent = new ArrayList<>();
        for (int first = 0; first < WRITES; first += POST_BATCH) {
            List<WorkRequest> batch = new ArrayList<>();
            for (int i = first; i < first + POST_BATCH; i++) {
                batch.add(WorkRequest.send(srcRegion, src + (long) i * SLOT, SLOT));
            }
            sent.addAll(sender.post(batch));
            if (first >= 2 * POST_BATCH) {
                sender.await(sent.get(first - POST_BATCH - 1));
            }
        }
        for (CompletableFuture<Completion> done : sent) {
            sender.await(done);
        }
        receiving.join(60_000);
        assertThat(receiving.isAlive()).as("the receiver saw every message").isFalse();
        assertThat(violations).isEmpty();
        assertThat(posted).as("the receives posted after the last message stay posted").hasSize(buffers)
                .noneMatch(CompletableFuture::isDone);
        assertThat(total(node2, "pagewire_receive_rnr_naks_sent_total", "cause=no_receive") - noReceiveBefore).as("receives ran short")
                .isPositive();
        assertThat(total(node2, "pagewire_duplicate_packets_total") - duplicatesBefore).as("duplicates were recognised").isPositive();
        sender.close();
        receiver.close();
        local.close();
        remote.close();
    }

    /** Slot i: its index, then bytes derived from it. */
    private static byte[] slot(int i) {
        byte[] bytes = pattern(i, SLOT);
        ByteBuffer.wrap(bytes).putLong(i);
        return bytes;
    }
}
