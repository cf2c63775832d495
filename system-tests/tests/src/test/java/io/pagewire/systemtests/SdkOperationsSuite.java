package io.pagewire.systemtests;

import static io.pagewire.node.TestData.awaitTrue;
import static io.pagewire.node.TestData.pattern;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Access;
import io.pagewire.client.Advice;
import io.pagewire.client.Completion;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.NodeInfo;
import io.pagewire.client.Opcode;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QpAddress;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.SharedReceiveQueue;
import io.pagewire.client.WorkRequest;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * Every operation of the public SDK against a two-node cluster, as applications see it. Each
 * binding registers the cluster (embedded, or containers) and says how its applications connect.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
abstract class SdkOperationsSuite {
    /** The cluster every binding runs the suite on. */
    static ClusterSpec spec() {
        return ClusterSpec.nodes(2).set("pagewire.nic.ackTimeoutNs", "50ms");
    }

    /** How the suite's applications reach their nodes (by default as the SDK chooses: rings when co-located). */
    protected ConnectOptions connectOptions() {
        return ConnectOptions.defaults();
    }

    private Pagewire connect(PagewireCluster cluster, int node) {
        return cluster.node(node).connect(connectOptions());
    }

    @Test
    void aNodeDescribesItselfAndItsMeters(PagewireCluster cluster) {
        Pagewire node = connect(cluster, 1);
        NodeInfo info = node.node();
        assertThat(info.nodeId()).isEqualTo("node-1");
        assertThat(info.pageSize()).isEqualTo(4096);
        assertThat(info.mtu()).isEqualTo(4096);
        assertThat(info.peers()).containsExactly("node-2");
        assertThat(info.physicalMemoryBytes()).isEqualTo(32L << 20);
        assertThat(node.stats()).containsKeys("pagewire_tlb_hits_total", "pagewire_memory_pages", "pagewire_link_sent_bytes_total");
        assertThat(node.stats().get("pagewire_memory_pages")).containsEntry("state=free", 8192.0);
    }

    @Test
    void memoryIsAllocatedStoredLoadedAndFreed(PagewireCluster cluster) {
        try (Endpoint endpoint = connect(cluster, 1).openEndpoint("memory")) {
            assertThat(endpoint.nodeId()).isEqualTo("node-1");
            long address = endpoint.allocate(3 * 4096 + 5);
            byte[] data = pattern(1, 9000);
            endpoint.store(address + 100, data);
            assertThat(endpoint.load(address + 100, 9000)).isEqualTo(data);
            assertThat(endpoint.loadAsync(address, 4).join()).containsOnly(0);
            endpoint.free(address);
        }
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void writesReadsNotificationsAndAtomicsInEveryMode(RegistrationMode mode, PagewireCluster cluster) throws Exception {
        Endpoint a = connect(cluster, 1).openEndpoint("a");
        Endpoint b = connect(cluster, 2).openEndpoint("b");
        int length = 100_000;
        long src = a.allocate(length);
        long back = a.allocate(length);
        long dst = b.allocate(length);
        MemoryRegion srcRegion = a.register(src, length, mode, Access.all());
        MemoryRegion backRegion = a.register(back, length, mode, Access.all());
        MemoryRegion dstRegion = b.register(dst, length, mode, EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ, Access.LOCAL_WRITE));
        assertThat(dstRegion.mode()).isEqualTo(mode);
        assertThat(dstRegion.remote().rkey()).isEqualTo(dstRegion.rkey());
        byte[] data = pattern(mode.ordinal(), length);
        a.store(src, data);

        QueuePair qp = a.connect(b);
        EventCounter arrivals = b.createEventCounter(EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_ATOMIC));
        List<Long> seen = new CopyOnWriteArrayList<>();
        AutoCloseable watch = arrivals.onChange(seen::add);

        Completion written = qp.await(qp.write(srcRegion, src, length, dst, dstRegion.rkey()));
        assertThat(written.opcode()).isEqualTo(Opcode.WRITE);
        assertThat(written.bytes()).isEqualTo(length);
        assertThat(b.load(dst, length)).isEqualTo(data);
        assertThat(dstRegion.stats().bytesReceived()).as("bytes the region received").isEqualTo(length);
        assertThat(srcRegion.stats().bytesSent()).as("bytes gathered from the source").isEqualTo(length);
        assertThat(dstRegion.stats().mode()).isEqualTo(mode);

        qp.await(qp.writeWithNotify(srcRegion, src, 10, dst, dstRegion.rkey(), arrivals.id()));
        assertThat(arrivals.await(1, Duration.ofSeconds(10))).isEqualTo(1);
        assertThat(arrivals.value()).isEqualTo(1);

        qp.await(qp.read(backRegion, back, length, dst, dstRegion.rkey()));
        assertThat(a.load(back, length)).isEqualTo(data);

        Completion added = qp.await(qp.fetchAdd(arrivals.id(), 41));
        assertThat(added.value()).as("the value before the add").isEqualTo(1);
        assertThat(arrivals.awaitAsync(42, Duration.ofSeconds(10)).get(20, TimeUnit.SECONDS)).isEqualTo(42);
        awaitTrue(() -> seen.contains(42L), 5_000, "the handler saw 42");
        assertThat(seen).containsSubsequence(1L, 42L);
        watch.close();

        List<WorkRequest> batch = new ArrayList<>();
        for (int i = 0; i < 50; i++) {
            batch.add(WorkRequest.write(srcRegion, src + i * 1000L, 1000, dst + i * 1000L, dstRegion.rkey()));
        }
        for (CompletableFuture<Completion> done : qp.post(batch)) {
            assertThat(qp.await(done).bytes()).isEqualTo(1000);
        }
        assertThat(arrivals.await(1000, Duration.ofMillis(50))).as("a wait that times out returns the value").isEqualTo(42);
        assertThat(arrivals.poll()).as("a first poll asks the node").isEqualTo(42);
        qp.await(qp.fetchAdd(arrivals.id(), 1));
        awaitTrue(() -> arrivals.poll() == 43, 5_000, "a poll reads the delivered 43");

        if (mode != RegistrationMode.PINNED) {
            dstRegion.advise(Advice.PREFETCH, dst, length);
        }
        dstRegion.close();
        srcRegion.close();
        qp.close();
        a.close();
        b.close();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void unsignalledWritesSettleWithTheSignalledOneAfterThem(RegistrationMode mode, PagewireCluster cluster) {
        Endpoint a = connect(cluster, 1).openEndpoint("a");
        Endpoint b = connect(cluster, 2).openEndpoint("b");
        int length = 64 * 1024;
        long src = a.allocate(length);
        long dst = b.allocate(length);
        byte[] data = pattern(7, length);
        a.store(src, data);
        MemoryRegion srcRegion = a.register(src, length, mode, Access.all());
        MemoryRegion dstRegion = b.register(dst, length, mode, Access.all());
        QueuePair qp = a.connect(b);
        List<WorkRequest> list = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            WorkRequest wr = WorkRequest.write(srcRegion, src + i * 1024L, 1024, dst + i * 1024L, dstRegion.rkey());
            list.add(i % 16 == 15 ? wr : wr.unsignaled());
        }
        List<CompletableFuture<Completion>> done = qp.post(list);
        for (int i = 0; i < done.size(); i++) {
            Completion c = qp.await(done.get(i));
            assertThat(c.bytes()).as("write " + i).isEqualTo(1024);
            assertThat(c.opcode()).isEqualTo(Opcode.WRITE);
        }
        assertThat(b.load(dst, length)).isEqualTo(data);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> WorkRequest.fetchAdd(1, 1).unsignaled())
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("result arrives only in its completion");
        qp.close();
        a.close();
        b.close();
    }

    @Test
    void anImplicitRegionAndQueuePairAddressesExchangedAsText(PagewireCluster cluster) {
        Endpoint a = connect(cluster, 1).openEndpoint("a");
        Endpoint b = connect(cluster, 2).openEndpoint("b");
        MemoryRegion everything = b.registerImplicit(Access.all());
        long dst = b.allocate(8192);
        long src = a.allocate(4096);
        MemoryRegion srcRegion = a.register(src, 4096, RegistrationMode.ON_DEMAND, Access.all());
        a.store(src, pattern(3, 4096));
        QueuePair qa = a.createQueuePairAsync().join();
        QueuePair qb = b.createQueuePair();
        // As two processes would: each prints its address, the other parses it.
        qa.connectAsync(QpAddress.parse(qb.address().toString())).join();
        qb.connect(QpAddress.parse(qa.address().toString()));
        qa.await(qa.write(srcRegion, src, 4096, dst + 100, everything.rkey()));
        assertThat(b.load(dst + 100, 4096)).isEqualTo(pattern(3, 4096));

        EventCounter counter = b.createEventCounterAsync(EnumSet.of(Access.REMOTE_WRITE)).join();
        qa.await(qa.writeWithNotify(srcRegion, src, 8, dst, everything.rkey(), counter.id()));
        assertThat(counter.valueAsync().join()).isEqualTo(1);
        counter.close();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> qa.await(qa.writeWithNotify(srcRegion, src, 8, dst, everything.rkey(),
                        counter.id())))
                .as("a closed counter refuses notifications").isInstanceOf(PagewireException.RemoteAccessException.class)
                .hasMessageContaining("event counter " + counter.id() + " on endpoint " + b.id() + " (b) does not exist");
        b.freeAsync(dst).join();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void sendsLandInPostedReceivesAndWritesWithImmediateDataConsumeThem(RegistrationMode mode, PagewireCluster cluster) {
        Endpoint a = connect(cluster, 1).openEndpoint("sender");
        Endpoint b = connect(cluster, 2).openEndpoint("receiver");
        int big = 3 * 4096 + 5;
        long src = a.allocate(big);
        a.store(src, pattern(11, big));
        MemoryRegion srcRegion = a.register(src, big, mode, Access.all());
        long buffers = b.allocate(4 * 16384);
        MemoryRegion receiveRegion = b.register(buffers, 4 * 16384, mode, Access.all());
        QueuePair qa = a.createQueuePair();
        QueuePair qb = b.createQueuePair();
        // A receive may be posted before the pair connects, as with ibv_post_recv in INIT.
        CompletableFuture<Completion> first = qb.postReceive(receiveRegion, buffers, 16384);
        qa.connect(qb.address());
        qb.connect(qa.address());
        CompletableFuture<Completion> second = qb.postReceive(receiveRegion, buffers + 16384, 16384);
        CompletableFuture<Completion> third = qb.postReceive(receiveRegion, buffers + 2 * 16384, 16384);

        assertThat(qa.await(qa.send(srcRegion, src, big)).opcode()).isEqualTo(Opcode.SEND);
        Completion received = qb.await(first);
        assertThat(received.opcode()).isEqualTo(Opcode.RECV);
        assertThat(received.bytes()).isEqualTo(big);
        assertThat(received.hasImmediate()).isFalse();
        assertThat(b.load(buffers, big)).isEqualTo(pattern(11, big));

        qa.await(qa.sendWithImm(srcRegion, src, 100, 0xCAFE));
        received = qb.await(second);
        assertThat(received.bytes()).isEqualTo(100);
        assertThat(received.hasImmediate()).isTrue();
        assertThat(received.immediate()).isEqualTo(0xCAFE);

        long target = buffers + 3 * 16384;
        assertThat(qa.await(qa.writeWithImm(srcRegion, src, 4096, target, receiveRegion.rkey(), -7)).opcode()).isEqualTo(Opcode.WRITE_WITH_IMM);
        received = qb.await(third);
        assertThat(received.opcode()).isEqualTo(Opcode.RECV_RDMA_WITH_IMM);
        assertThat(received.bytes()).isEqualTo(4096);
        assertThat(received.immediate()).isEqualTo(-7);
        assertThat(b.load(target, 4096)).isEqualTo(Arrays.copyOf(pattern(11, big), 4096));
        a.close();
        b.close();
    }

    @Test
    void aSendWaitsForAReceiveAndOneLongerThanItsBufferFailsOnBothSides(PagewireCluster cluster) throws Exception {
        Endpoint a = connect(cluster, 1).openEndpoint("sender");
        Endpoint b = connect(cluster, 2).openEndpoint("receiver");
        long src = a.allocate(4096);
        a.store(src, pattern(5, 4096));
        MemoryRegion srcRegion = a.register(src, 4096, RegistrationMode.PINNED, Access.all());
        long buffer = b.allocate(4096);
        MemoryRegion receiveRegion = b.register(buffer, 4096, RegistrationMode.PINNED, Access.all());
        QueuePair qa = a.createQueuePair();
        QueuePair qb = b.createQueuePair();
        qa.connect(qb.address());
        qb.connect(qa.address());

        CompletableFuture<Completion> early = qa.send(srcRegion, src, 64);
        Thread.sleep(50);
        assertThat(early).as("no receive is posted: the peer answers RNR and the SEND waits").isNotDone();
        Completion received = qb.await(qb.postReceive(receiveRegion, buffer, 4096));
        assertThat(received.bytes()).isEqualTo(64);
        qa.await(early);
        assertThat(b.load(buffer, 64)).isEqualTo(Arrays.copyOf(pattern(5, 4096), 64));

        org.assertj.core.api.Assertions.assertThatThrownBy(() -> qb.await(qb.postReceive(receiveRegion, buffer + 4090, 16)))
                .as("a buffer outside its region is refused").isInstanceOf(PagewireException.InvalidRequestException.class);
        CompletableFuture<Completion> small = qb.postReceive(receiveRegion, buffer, 16);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> qa.await(qa.send(srcRegion, src, 100)))
                .isInstanceOf(PagewireException.RemoteOperationException.class).hasMessageContaining("length error");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> qb.await(small))
                .isInstanceOf(PagewireException.LengthException.class).hasMessageContaining("16-byte receive buffer");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> qb.await(qb.postReceive(receiveRegion, buffer, 16)))
                .as("the receiving queue pair failed with the length error").isInstanceOf(PagewireException.FlushedException.class);
        a.close();
        b.close();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void fetchAddAndCompareSwapOnRegisteredMemoryInEveryMode(RegistrationMode mode, PagewireCluster cluster) {
        Endpoint a = connect(cluster, 1).openEndpoint("a");
        Endpoint b = connect(cluster, 2).openEndpoint("b");
        long words = b.allocate(4096);
        MemoryRegion target = b.register(words, 4096, mode, EnumSet.of(Access.LOCAL_WRITE, Access.REMOTE_ATOMIC));
        QueuePair qp = a.connect(b);
        Completion added = qp.await(qp.fetchAdd(words + 8, target.rkey(), 40));
        assertThat(added.opcode()).isEqualTo(Opcode.FETCH_ADD);
        assertThat(added.value()).isZero();
        assertThat(qp.await(qp.fetchAdd(words + 8, target.rkey(), 2)).value()).isEqualTo(40);
        assertThat(qp.await(qp.compareSwap(words + 8, target.rkey(), 0, 7)).value()).as("no swap: the word is 42").isEqualTo(42);
        Completion swapped = qp.await(qp.compareSwap(words + 8, target.rkey(), 42, 7));
        assertThat(swapped.opcode()).isEqualTo(Opcode.COMPARE_SWAP);
        assertThat(swapped.value()).isEqualTo(42);
        assertThat(ByteBuffer.wrap(b.load(words + 8, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong())
                .as("the word, little-endian in the peer's memory").isEqualTo(7);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> qp.await(qp.fetchAdd(words + 12, target.rkey(), 1)))
                .as("a misaligned word is refused").isInstanceOf(PagewireException.InvalidRequestException.class)
                .hasMessageContaining("8-byte aligned");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> WorkRequest.compareSwap(words, target.rkey(), 0, 1).unsignaled())
                .isInstanceOf(IllegalArgumentException.class);
        a.close();
        b.close();
    }

    @Test
    void queuePairsOnASharedReceiveQueueDrawFromOnePoolThatAsksToBeRefilled(PagewireCluster cluster) throws Exception {
        Endpoint server = connect(cluster, 2).openEndpoint("server");
        Endpoint client1 = connect(cluster, 1).openEndpoint("client-1");
        Endpoint client2 = connect(cluster, 1).openEndpoint("client-2");
        SharedReceiveQueue srq = server.createSharedReceiveQueue();
        long pool = server.allocate(6 * 1024);
        MemoryRegion poolRegion = server.register(pool, 6 * 1024, RegistrationMode.SHADOW, Access.all());
        List<CompletableFuture<Completion>> receives = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            receives.add(srq.postReceive(poolRegion, pool + i * 1024L, 1024));
        }
        CompletableFuture<Void> refill = new CompletableFuture<>();
        srq.onLimit(3, () -> refill.complete(null));
        List<QueuePair> senders = new ArrayList<>();
        List<QueuePair> serverSide = new ArrayList<>();
        for (Endpoint client : List.of(client1, client2)) {
            QueuePair mine = client.createQueuePair();
            QueuePair theirs = server.createQueuePair(srq);
            mine.connect(theirs.address());
            theirs.connect(mine.address());
            senders.add(mine);
            serverSide.add(theirs);
        }
        for (int i = 0; i < 4; i++) {
            Endpoint client = i % 2 == 0 ? client1 : client2;
            long src = client.allocate(100);
            client.store(src, pattern(i, 100));
            MemoryRegion srcRegion = client.register(src, 100, RegistrationMode.PINNED, Access.all());
            QueuePair qp = senders.get(i % 2);
            qp.await(qp.send(srcRegion, src, 100));
        }
        List<Integer> qpns = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            Completion c = serverSide.get(0).await(receives.get(i));
            assertThat(c.bytes()).isEqualTo(100);
            qpns.add(c.qpn());
            assertThat(server.load(pool + i * 1024L, 100)).as("the i-th SEND landed in the i-th posted buffer").isEqualTo(pattern(i, 100));
        }
        assertThat(qpns).as("both queue pairs drew from the pool").containsOnly(serverSide.get(0).qpn(), serverSide.get(1).qpn())
                .contains(serverSide.get(0).qpn(), serverSide.get(1).qpn());
        refill.get(10, TimeUnit.SECONDS);
        org.assertj.core.api.Assertions.assertThatThrownBy(srq::close).as("in use by two queue pairs")
                .isInstanceOf(PagewireException.class).hasMessageContaining("still used by 2");
        serverSide.forEach(QueuePair::close);
        srq.close();
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> receives.get(5).join())
                .hasCauseInstanceOf(PagewireException.FlushedException.class);
        client1.close();
        client2.close();
        server.close();
    }

    @Test
    void twoEndpointsOfOneNodeTalkThroughAQueuePair(PagewireCluster cluster) {
        Endpoint a = connect(cluster, 1).openEndpoint("first");
        Endpoint b = connect(cluster, 1).openEndpoint("second");
        long src = a.allocate(8192);
        a.store(src, pattern(21, 8192));
        MemoryRegion from = a.register(src, 8192, RegistrationMode.ON_DEMAND, Access.all());
        long dst = b.allocate(8192);
        MemoryRegion to = b.register(dst, 8192, RegistrationMode.SHADOW, Access.all());
        QueuePair qp = a.connect(b);
        qp.await(qp.write(from, src, 8192, dst, to.rkey()));
        assertThat(b.load(dst, 8192)).as("a node carries traffic to itself").isEqualTo(pattern(21, 8192));
        a.close();
        b.close();
    }
}
