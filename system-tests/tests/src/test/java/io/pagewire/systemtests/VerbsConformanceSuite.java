package io.pagewire.systemtests;

import static io.pagewire.node.TestData.pattern;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.Advice;
import io.pagewire.client.Completion;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Opcode;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegionStats;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.SharedReceiveQueue;
import io.pagewire.client.WorkRequest;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The verbs conformance suite, modelled on rdma-core's own tests of ODP, memory regions, queue pairs
 * and atomics ({@code tests/test_odp.py}, {@code test_mr.py}, {@code test_qp.py},
 * {@code test_atomic.py}, {@code test_srq.py} in linux-rdma/rdma-core): each test's name starts with the
 * upstream scenario it mirrors. Where upstream forces page faults (its {@code force_page_faults},
 * an madvise before each iteration), these page both sides' buffers out before every iteration, and
 * they run in every registration mode, not only ODP. Each binding says where the cluster runs and how
 * applications reach it.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
abstract class VerbsConformanceSuite {
    private static final int ITERATIONS = 20;
    private static final int MESSAGE = 1024;

    /** The cluster every binding runs the suite on. */
    static ClusterSpec spec() {
        return ClusterSpec.nodes(2).set("pagewire.nic.ackTimeoutNs", "50ms");
    }

    /** How the suite's applications reach their nodes (by default as the SDK chooses). */
    protected ConnectOptions connectOptions() {
        return ConnectOptions.defaults();
    }

    /** Two endpoints, one per node, with a queue pair between them and a buffer on each side (upstream's client and server). */
    private final class Players implements AutoCloseable {
        final Endpoint client;
        final Endpoint server;
        final QueuePair clientQp;
        final QueuePair serverQp;
        final MemoryRegion clientMr;
        final MemoryRegion serverMr;

        /** The buffers' addresses (an implicit region covers the whole space, so they are kept apart from it). */
        final long clientBuffer;
        final long serverBuffer;
        final RegistrationMode mode;

        Players(PagewireCluster cluster, RegistrationMode mode, int size, boolean implicit) {
            client = cluster.node(1).connect(connectOptions()).openEndpoint("client");
            server = cluster.node(2).connect(connectOptions()).openEndpoint("server");
            this.mode = mode;
            clientBuffer = client.allocate(size);
            serverBuffer = server.allocate(size);
            clientMr = register(client, clientBuffer, mode, size, implicit);
            serverMr = register(server, serverBuffer, mode, size, implicit);
            clientQp = client.createQueuePair();
            serverQp = server.createQueuePair();
            clientQp.connect(serverQp.address());
            serverQp.connect(clientQp.address());
        }

        private MemoryRegion register(Endpoint endpoint, long address, RegistrationMode mode, int size, boolean implicit) {
            endpoint.store(address, new byte[size]);
            return implicit ? endpoint.registerImplicit(Access.all()) : endpoint.register(address, size, mode, Access.all());
        }

        long clientBuffer() {
            return clientBuffer;
        }

        long serverBuffer() {
            return serverBuffer;
        }

        /**
         * upstream's force_page_faults: both buffers leave memory before an iteration. The server's buffer
         * was touched by the last iteration, so in the modes that do not pin it really goes.
         */
        void forcePageFaults(int size) {
            client.pageOut(clientBuffer(), size);
            int out = server.pageOut(serverBuffer(), size);
            if (mode == RegistrationMode.SHADOW || mode == RegistrationMode.ON_DEMAND) {
                // Like MADV_PAGEOUT, a page under DMA stays (the last response's send may still hold its
                // frame for a moment): ask again until it goes, within a bound.
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (out == 0 && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                    out = server.pageOut(serverBuffer(), size);
                }
                assertThat(out).as("the server's buffer was paged out").isPositive();
            }
        }

        @Override
        public void close() {
            client.close();
            server.close();
        }
    }

    private Players players(PagewireCluster cluster, RegistrationMode mode, int size) {
        return new Players(cluster, mode, size, false);
    }

    /** upstream's u.traffic: the client SENDs, the server receives into its posted buffer, then back. */
    private static void sendRecvTraffic(Players p, int size, boolean forcePageFaults) {
        for (int i = 0; i < ITERATIONS; i++) {
            if (forcePageFaults) {
                p.forcePageFaults(size);
            }
            byte[] ping = pattern(i, size);
            p.client.store(p.clientBuffer(), ping);
            CompletableFuture<Completion> serverRecv = p.serverQp.postReceive(p.serverMr, p.serverBuffer(), size);
            CompletableFuture<Completion> clientRecv = p.clientQp.postReceive(p.clientMr, p.clientBuffer(), size);
            p.clientQp.await(p.clientQp.send(p.clientMr, p.clientBuffer(), size));
            assertThat(p.serverQp.await(serverRecv).bytes()).isEqualTo(size);
            assertThat(p.server.load(p.serverBuffer(), size)).as("iteration " + i + " at the server").isEqualTo(ping);
            byte[] pong = pattern(1000 + i, size);
            p.server.store(p.serverBuffer(), pong);
            p.serverQp.await(p.serverQp.send(p.serverMr, p.serverBuffer(), size));
            assertThat(p.clientQp.await(clientRecv).opcode()).isEqualTo(Opcode.RECV);
            assertThat(p.client.load(p.clientBuffer(), size)).as("iteration " + i + " back at the client").isEqualTo(pong);
        }
    }

    private static long word(Endpoint endpoint, long address) {
        return ByteBuffer.wrap(endpoint.load(address, 8)).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    private static void storeWord(Endpoint endpoint, long address, long value) {
        endpoint.store(address, ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(value).array());
    }

    // ---- test_odp.py ---------------------------------------------------------------------------------

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_odp_rc_traffic_sendRecvWithPagesForcedOutEveryIteration(RegistrationMode mode, PagewireCluster cluster) {
        try (Players p = players(cluster, mode, MESSAGE)) {
            sendRecvTraffic(p, MESSAGE, true);
        }
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_odp_rc_rdma_write_withPagesForcedOutEveryIteration(RegistrationMode mode, PagewireCluster cluster) {
        try (Players p = players(cluster, mode, MESSAGE)) {
            for (int i = 0; i < ITERATIONS; i++) {
                p.forcePageFaults(MESSAGE);
                p.client.store(p.clientBuffer(), pattern(i, MESSAGE));
                p.clientQp.await(p.clientQp.write(p.clientMr, p.clientBuffer(), MESSAGE, p.serverBuffer(), p.serverMr.rkey()));
                assertThat(p.server.load(p.serverBuffer(), MESSAGE)).as("write " + i).isEqualTo(pattern(i, MESSAGE));
            }
        }
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_odp_rc_rdma_read_withPagesForcedOutEveryIteration(RegistrationMode mode, PagewireCluster cluster) {
        try (Players p = players(cluster, mode, MESSAGE)) {
            for (int i = 0; i < ITERATIONS; i++) {
                p.server.store(p.serverBuffer(), pattern(i, MESSAGE));
                p.forcePageFaults(MESSAGE);
                p.clientQp.await(p.clientQp.read(p.clientMr, p.clientBuffer(), MESSAGE, p.serverBuffer(), p.serverMr.rkey()));
                assertThat(p.client.load(p.clientBuffer(), MESSAGE)).as("read " + i).isEqualTo(pattern(i, MESSAGE));
            }
        }
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_odp_rc_atomic_fetch_and_add_withPagesForcedOut(RegistrationMode mode, PagewireCluster cluster) {
        try (Players p = players(cluster, mode, 8)) {
            for (int i = 0; i < ITERATIONS; i++) {
                p.forcePageFaults(8);
                Completion c = p.clientQp.await(p.clientQp.fetchAdd(p.serverBuffer(), p.serverMr.rkey(), 3));
                assertThat(c.value()).isEqualTo(3L * i);
            }
            assertThat(word(p.server, p.serverBuffer())).isEqualTo(3L * ITERATIONS);
        }
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_odp_rc_atomic_cmp_and_swp_withPagesForcedOut(RegistrationMode mode, PagewireCluster cluster) {
        try (Players p = players(cluster, mode, 8)) {
            // As upstream: once where the compare fails (0 != 1), once where it matches and swaps.
            p.forcePageFaults(8);
            assertThat(p.clientQp.await(p.clientQp.compareSwap(p.serverBuffer(), p.serverMr.rkey(), 1, 1)).value()).isZero();
            assertThat(word(p.server, p.serverBuffer())).isZero();
            storeWord(p.server, p.serverBuffer(), 1);
            p.forcePageFaults(8);
            assertThat(p.clientQp.await(p.clientQp.compareSwap(p.serverBuffer(), p.serverMr.rkey(), 1, 77)).value()).isEqualTo(1);
            assertThat(word(p.server, p.serverBuffer())).isEqualTo(77);
        }
    }

    @Test
    void test_odp_implicit_rc_traffic_withPagesForcedOut(PagewireCluster cluster) {
        try (Players p = implicitPlayers(cluster)) {
            sendRecvTraffic(p, MESSAGE, true);
            p.clientQp.await(p.clientQp.write(p.clientMr, p.clientBuffer(), MESSAGE, p.serverBuffer(), p.serverMr.rkey()));
            assertThat(p.server.load(p.serverBuffer(), MESSAGE)).isEqualTo(p.client.load(p.clientBuffer(), MESSAGE));
        }
    }

    private Players implicitPlayers(PagewireCluster cluster) {
        return new Players(cluster, RegistrationMode.ON_DEMAND, MESSAGE, true);
    }

    @ParameterizedTest
    @EnumSource(value = Advice.class, names = {"PREFETCH", "PREFETCH_WRITE"})
    void test_odp_sync_prefetch_rc_traffic(Advice advice, PagewireCluster cluster) {
        prefetchThenTraffic(cluster, advice, true, false);
    }

    @ParameterizedTest
    @EnumSource(value = Advice.class, names = {"PREFETCH", "PREFETCH_WRITE"})
    void test_odp_async_prefetch_rc_traffic(Advice advice, PagewireCluster cluster) {
        prefetchThenTraffic(cluster, advice, false, false);
    }

    @Test
    void test_odp_prefetch_sync_no_page_fault_rc_traffic(PagewireCluster cluster) {
        prefetchThenTraffic(cluster, Advice.PREFETCH_NO_FAULT, true, false);
    }

    @Test
    void test_odp_prefetch_async_no_page_fault_rc_traffic(PagewireCluster cluster) {
        prefetchThenTraffic(cluster, Advice.PREFETCH_NO_FAULT, false, false);
    }

    @Test
    void test_odp_implicit_sync_prefetch_rc_traffic(PagewireCluster cluster) {
        prefetchThenTraffic(cluster, Advice.PREFETCH_WRITE, true, true);
    }

    @Test
    void test_odp_implicit_async_prefetch_rc_traffic(PagewireCluster cluster) {
        prefetchThenTraffic(cluster, Advice.PREFETCH_WRITE, false, true);
    }

    /**
     * Upstream's use_mr_prefetch: each iteration pages out, advises both buffers (waiting or not), then
     * runs traffic; and, beyond upstream, the region's counters show the prefetch did its work: a
     * prefetch brings the paged-out receive buffer in (counted as prefetched, faulted by the prefetch),
     * so that a synchronous one leaves the SEND nothing to fault; NO_FAULT brings nothing in, and the
     * SEND faults.
     */
    private void prefetchThenTraffic(PagewireCluster cluster, Advice advice, boolean sync, boolean implicit) {
        boolean noFault = advice == Advice.PREFETCH_NO_FAULT;
        try (Players p = implicit ? implicitPlayers(cluster) : players(cluster, RegistrationMode.ON_DEMAND, MESSAGE)) {
            for (int i = 0; i < 5; i++) {
                p.forcePageFaults(MESSAGE);
                RegionStats before = p.serverMr.stats();
                CompletableFuture<Void> a = p.clientMr.adviseAsync(advice, p.clientBuffer(), MESSAGE);
                CompletableFuture<Void> b = p.serverMr.adviseAsync(advice, p.serverBuffer(), MESSAGE);
                RegionStats advised = null;
                if (sync) {
                    a.join();
                    b.join();
                    advised = p.serverMr.stats();
                    assertThat(advised.prefetchedPages() - before.prefetchedPages()).as("%s: pages the prefetch brought in", advice)
                            .isEqualTo(noFault ? 0 : 1);
                    assertThat(faults(advised) - faults(before)).as("%s: the prefetch's own faults", advice).isEqualTo(noFault ? 0 : 1);
                }
                byte[] data = pattern(i, MESSAGE);
                p.client.store(p.clientBuffer(), data);
                CompletableFuture<Completion> recv = p.serverQp.postReceive(p.serverMr, p.serverBuffer(), MESSAGE);
                p.clientQp.await(p.clientQp.send(p.clientMr, p.clientBuffer(), MESSAGE));
                p.serverQp.await(recv);
                RegionStats after = p.serverMr.stats();
                if (sync && noFault) {
                    // At least one: a resend that arrives while a huge page is still coming in faults again.
                    assertThat(faults(after) - faults(advised)).as("%s: faults the SEND took on the receive buffer", advice).isPositive();
                } else if (sync) {
                    assertThat(faults(after) - faults(advised)).as("%s: faults the SEND took on the receive buffer", advice).isZero();
                }
                assertThat(p.server.load(p.serverBuffer(), MESSAGE)).isEqualTo(data);
                a.join();
                b.join();
                if (!noFault) {
                    assertThat(p.serverMr.stats().prefetchedPages() - before.prefetchedPages()).as("%s (async): pages prefetched", advice)
                            .isPositive();
                }
            }
        }
    }

    private static long faults(RegionStats stats) {
        return stats.minorFaults() + stats.majorFaults();
    }

    // ---- test_mr.py ----------------------------------------------------------------------------------

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_reg_mr_and_test_dereg_mr_withEveryLegalAccessCombination(RegistrationMode mode, PagewireCluster cluster) {
        Endpoint endpoint = cluster.node(1).connect(connectOptions()).openEndpoint("mr");
        long address = endpoint.allocate(4 * 4096);
        int registered = 0;
        for (Set<Access> access : accessCombinations()) {
            if (legal(access)) {
                MemoryRegion mr = endpoint.register(address, 4 * 4096, mode, access);
                assertThat(mr.lkey()).isPositive();
                assertThat(mr.rkey()).isNotZero();
                mr.close();
                registered++;
            }
        }
        assertThat(registered).as("legal combinations of the four rights: 15 less the 6 with a remote write or atomic but no local write")
                .isEqualTo(9);
        endpoint.close();
    }

    @Test
    void test_dereg_mr_twice_isHarmless(PagewireCluster cluster) {
        Endpoint endpoint = cluster.node(1).connect(connectOptions()).openEndpoint("mr");
        long address = endpoint.allocate(4096);
        MemoryRegion mr = endpoint.register(address, 4096, RegistrationMode.PINNED, Access.all());
        mr.close();
        mr.close();
        endpoint.close();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_reg_mr_bad_flags_remoteWriteOrAtomicWithoutLocalWriteIsRefused(RegistrationMode mode, PagewireCluster cluster) {
        Endpoint endpoint = cluster.node(1).connect(connectOptions()).openEndpoint("mr");
        long address = endpoint.allocate(4096);
        for (Set<Access> access : accessCombinations()) {
            if (!legal(access)) {
                assertThatThrownBy(() -> endpoint.register(address, 4096, mode, access)).as(access.toString())
                        .isInstanceOf(PagewireException.InvalidRequestException.class).hasMessageContaining("need LOCAL_WRITE");
            }
        }
        endpoint.close();
    }

    @Test
    void test_reg_mr_zeroAndHugeLengthsAreRefusedWithTheReason(PagewireCluster cluster) {
        Endpoint endpoint = cluster.node(1).connect(connectOptions()).openEndpoint("mr");
        long address = endpoint.allocate(8192);
        assertThatThrownBy(() -> endpoint.register(address, 0, RegistrationMode.PINNED, Access.all()))
                .isInstanceOf(PagewireException.InvalidRequestException.class).hasMessageContaining("length must be positive");
        assertThatThrownBy(() -> endpoint.register(address, 1L << 40, RegistrationMode.ON_DEMAND, Access.all()))
                .as("a range beyond the allocation").isInstanceOf(PagewireException.class);
        assertThatThrownBy(() -> endpoint.register(address, Long.MAX_VALUE, RegistrationMode.PINNED, Access.all()))
                .isInstanceOf(PagewireException.class);
        MemoryRegion ok = endpoint.register(address, 8192, RegistrationMode.PINNED, Access.all());
        assertThat(ok.length()).isEqualTo(8192);
        endpoint.close();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_mr_deregistrationWhileInUseFailsLaterRequestsAndTheNodeKeepsServing(RegistrationMode mode, PagewireCluster cluster) {
        try (Players p = players(cluster, mode, 64 * 1024)) {
            List<CompletableFuture<Completion>> writes = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                writes.add(p.clientQp.write(p.clientMr, p.clientBuffer() + i * 1024L, 1024, p.serverBuffer() + i * 1024L, p.serverMr.rkey()));
            }
            p.serverMr.close();
            int ok = 0;
            int refused = 0;
            for (CompletableFuture<Completion> w : writes) {
                try {
                    p.clientQp.await(w);
                    ok++;
                } catch (PagewireException.RemoteAccessException | PagewireException.FlushedException e) {
                    refused++;
                }
            }
            assertThat(ok + refused).isEqualTo(64);
            // The queue pair failed as RC does; a fresh one to the same node still works.
            MemoryRegion fresh = p.server.register(p.serverBuffer(), 64 * 1024, mode, Access.all());
            QueuePair a = p.client.createQueuePair();
            QueuePair b = p.server.createQueuePair();
            a.connect(b.address());
            b.connect(a.address());
            a.await(a.write(p.clientMr, p.clientBuffer(), 1024, p.serverBuffer(), fresh.rkey()));
            assertThatThrownBy(() -> a.await(a.write(p.clientMr, p.clientBuffer(), 1024, p.serverBuffer(), p.serverMr.rkey())))
                    .as("the old rkey stays refused").isInstanceOf(PagewireException.RemoteAccessException.class);
        }
    }

    private static List<Set<Access>> accessCombinations() {
        List<Set<Access>> all = new ArrayList<>();
        Access[] rights = {Access.LOCAL_WRITE, Access.REMOTE_WRITE, Access.REMOTE_READ, Access.REMOTE_ATOMIC};
        for (int bits = 1; bits < 16; bits++) {
            Set<Access> set = EnumSet.noneOf(Access.class);
            for (int r = 0; r < 4; r++) {
                if ((bits & (1 << r)) != 0) {
                    set.add(rights[r]);
                }
            }
            all.add(set);
        }
        return all;
    }

    private static boolean legal(Set<Access> access) {
        return access.contains(Access.LOCAL_WRITE) || !(access.contains(Access.REMOTE_WRITE) || access.contains(Access.REMOTE_ATOMIC));
    }

    // ---- test_atomic.py ------------------------------------------------------------------------------

    @Test
    void test_atomic_invalid_mr_access_isRefusedByTheResponder(PagewireCluster cluster) {
        try (Players p = players(cluster, RegistrationMode.PINNED, 8)) {
            MemoryRegion noAtomic = p.server.register(p.serverBuffer(), 8, RegistrationMode.PINNED, EnumSet.of(Access.LOCAL_WRITE));
            assertThatThrownBy(() -> p.clientQp.await(p.clientQp.fetchAdd(p.serverBuffer(), noAtomic.rkey(), 1)))
                    .isInstanceOf(PagewireException.RemoteAccessException.class).hasMessageContaining("REMOTE_ATOMIC");
        }
    }

    @Test
    void test_atomic_non_aligned_addr_isRefused(PagewireCluster cluster) {
        try (Players p = players(cluster, RegistrationMode.PINNED, 16)) {
            assertThatThrownBy(() -> p.clientQp.await(p.clientQp.fetchAdd(p.serverBuffer() + 1, p.serverMr.rkey(), 1)))
                    .isInstanceOf(PagewireException.InvalidRequestException.class).hasMessageContaining("8-byte aligned");
        }
    }

    @Test
    void test_atomic_invalid_rkey_isRefused(PagewireCluster cluster) {
        try (Players p = players(cluster, RegistrationMode.PINNED, 8)) {
            assertThatThrownBy(() -> p.clientQp.await(p.clientQp.fetchAdd(p.serverBuffer(), p.serverMr.rkey() + 4, 1)))
                    .isInstanceOf(PagewireException.RemoteAccessException.class).hasMessageContaining("is not registered");
            assertThat(word(p.server, p.serverBuffer())).isZero();
        }
    }

    // ---- test_qp.py ----------------------------------------------------------------------------------

    @Test
    void test_modify_rc_qp_connectingTwiceOrPostingBeforeConnectingIsRefused(PagewireCluster cluster) {
        try (Players p = players(cluster, RegistrationMode.PINNED, 64)) {
            assertThatThrownBy(() -> p.clientQp.connect(p.serverQp.address())).isInstanceOf(PagewireException.class)
                    .hasMessageContaining("cannot connect");
            QueuePair unconnected = p.client.createQueuePair();
            assertThatThrownBy(() -> unconnected.await(unconnected.write(p.clientMr, p.clientBuffer(), 8, p.serverBuffer(), p.serverMr.rkey())))
                    .isInstanceOf(PagewireException.InvalidRequestException.class).hasMessageContaining("not connected");
            // A receive may be posted before the pair connects (ibv_post_recv in INIT).
            CompletableFuture<Completion> early = unconnected.postReceive(p.clientMr, p.clientBuffer(), 64);
            QueuePair peer = p.server.createQueuePair();
            unconnected.connect(peer.address());
            peer.connect(unconnected.address());
            peer.await(peer.send(p.serverMr, p.serverBuffer(), 64));
            assertThat(unconnected.await(early).bytes()).isEqualTo(64);
        }
    }

    // ---- test_srq.py ---------------------------------------------------------------------------------

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void test_rc_srq_traffic_withPagesForcedOut(RegistrationMode mode, PagewireCluster cluster) {
        Endpoint client = cluster.node(1).connect(connectOptions()).openEndpoint("client");
        Endpoint server = cluster.node(2).connect(connectOptions()).openEndpoint("server");
        long src = client.allocate(MESSAGE);
        MemoryRegion srcMr = client.register(src, MESSAGE, mode, Access.all());
        long pool = server.allocate(4L * MESSAGE);
        MemoryRegion poolMr = server.register(pool, 4L * MESSAGE, mode, Access.all());
        SharedReceiveQueue srq = server.createSharedReceiveQueue();
        QueuePair clientQp = client.createQueuePair();
        QueuePair serverQp = server.createQueuePair(srq);
        clientQp.connect(serverQp.address());
        serverQp.connect(clientQp.address());
        for (int i = 0; i < ITERATIONS; i++) {
            long slot = pool + (i % 4) * (long) MESSAGE;
            server.pageOut(pool, 4L * MESSAGE);
            client.store(src, pattern(i, MESSAGE));
            client.pageOut(src, MESSAGE);
            CompletableFuture<Completion> recv = srq.postReceive(poolMr, slot, MESSAGE);
            clientQp.await(clientQp.send(srcMr, src, MESSAGE));
            assertThat(serverQp.await(recv).qpn()).isEqualTo(serverQp.qpn());
            assertThat(server.load(slot, MESSAGE)).isEqualTo(pattern(i, MESSAGE));
        }
        client.close();
        server.close();
    }
}
