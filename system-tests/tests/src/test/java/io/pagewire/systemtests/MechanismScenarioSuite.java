package io.pagewire.systemtests;

import static io.pagewire.node.TestData.crc;
import static io.pagewire.node.TestData.pattern;
import static io.pagewire.systemtests.ClusterChecks.total;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Access;
import io.pagewire.client.Advice;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Opcode;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import io.pagewire.testkit.WithSettings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The node-level mechanism scenarios as an operator sees them: each mechanism shows in the meters
 * the node exports (TLB misses, RNR NAKs, system-buffer parking, credit waits, pin bounds, lane
 * back-pressure, prefetch), read through the SDK from whatever cluster the binding starts. Each test
 * gets a cluster of its own with its settings ({@link WithSettings}).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
abstract class MechanismScenarioSuite {
    private static final int PAGE = 4096;

    /** Two default-sized test nodes; each test adds its own settings. */
    static ClusterSpec spec() {
        return ClusterSpec.nodes(2).set("pagewire.nic.ackTimeoutNs", "50ms");
    }

    /** Two endpoints, one per node, with their sessions, and a queue pair between them. */
    private record Pair(Pagewire node1, Pagewire node2, Endpoint local, Endpoint remote, QueuePair qp) {
    }

    private static Pair pair(PagewireCluster cluster) {
        Pagewire node1 = cluster.node(1).connect();
        Pagewire node2 = cluster.node(2).connect();
        Endpoint local = node1.openEndpoint("local");
        Endpoint remote = node2.openEndpoint("remote");
        return new Pair(node1, node2, local, remote, local.connect(remote));
    }

    @Test
    @WithSettings({"pagewire.nic.tlbEntries=64", "pagewire.nic.tlbWays=4"})
    void aSixtyFourEntryTlbMissesOnEveryPageOfAThousandPageWrite(PagewireCluster cluster) {
        Pair p = pair(cluster);
        int length = 1000 * PAGE;
        long src = p.local().allocate(length);
        long dst = p.remote().allocate(length);
        p.remote().store(dst, new byte[length]); // resident: misses, not faults
        MemoryRegion srcRegion = p.local().register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = p.remote().register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
        p.local().store(src, pattern(1, length));
        p.qp().await(p.qp().write(srcRegion, src, length, dst, dstRegion.rkey()));
        assertThat(total(p.node2(), "pagewire_tlb_misses_total", "mode=ON_DEMAND")).isGreaterThanOrEqualTo(1000);
        assertThat(total(p.node2(), "pagewire_tlb_evictions_total", "mode=ON_DEMAND")).isGreaterThanOrEqualTo(1000 - 64);
        assertThat(total(p.node2(), "pagewire_rnr_naks_sent_total")).as("every page was resident").isZero();
    }

    @Test
    @WithSettings({"pagewire.kernel.physicalMemoryBytes=4MiB", "pagewire.kernel.swapBytes=64MiB"})
    void onDemandReceiveIntoSwappedOutPagesAnswersRnrNakAndTheSenderRetransmits(PagewireCluster cluster) {
        Pair p = pair(cluster);
        int length = 512 * PAGE;
        long dst = p.remote().allocate(length);
        p.remote().store(dst, pattern(2, length));
        long cold = p.remote().allocate(8L << 20);
        p.remote().store(cold, new byte[8 << 20]); // pushes the destination out to swap
        assertThat(total(p.node2(), "pagewire_memory_pages", "state=swapped")).isGreaterThan(400);
        long src = p.local().allocate(length);
        byte[] data = pattern(3, length);
        p.local().store(src, data);
        MemoryRegion srcRegion = p.local().register(src, length, RegistrationMode.ON_DEMAND, Access.all());
        MemoryRegion dstRegion = p.remote().register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
        p.qp().await(p.qp().write(srcRegion, src, length, dst, dstRegion.rkey()));
        assertThat(total(p.node2(), "pagewire_rnr_naks_sent_total")).isPositive();
        assertThat(total(p.node2(), "pagewire_nic_page_faults_total", "side=receive", "kind=major", "mode=ON_DEMAND")).isPositive();
        assertThat(total(p.node1(), "pagewire_rnr_naks_received_total")).isPositive();
        assertThat(total(p.node1(), "pagewire_retransmitted_packets_total")).isPositive();
        assertThat(crc(p.remote().load(dst, length))).isEqualTo(crc(data));
    }

    @Test
    @WithSettings("pagewire.nic.creditsPerQp=4")
    void shadowParksDataForNonResidentPagesAndSendersWaitForCredits(PagewireCluster cluster) {
        Pair p = pair(cluster);
        int length = 256 * PAGE;
        long src = p.local().allocate(length);
        long dst = p.remote().allocate(length); // never touched: nothing resident
        byte[] data = pattern(4, length);
        p.local().store(src, data);
        MemoryRegion srcRegion = p.local().register(src, length, RegistrationMode.SHADOW, Access.all());
        MemoryRegion dstRegion = p.remote().register(dst, length, RegistrationMode.SHADOW, Access.all());
        EventCounter done = p.remote().createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        p.qp().await(p.qp().writeWithNotify(srcRegion, src, length, dst, dstRegion.rkey(), done.id()));
        assertThat(done.await(1, Duration.ofSeconds(10))).isEqualTo(1);
        assertThat(total(p.node2(), "pagewire_parked_parts_total", "mode=SHADOW")).isPositive();
        assertThat(total(p.node2(), "pagewire_system_buffer_parked_bytes_total")).isPositive();
        assertThat(total(p.node2(), "pagewire_system_buffer_used_bytes")).as("everything parked was placed").isZero();
        assertThat(total(p.node1(), "pagewire_credit_waits_total")).isPositive();
        assertThat(crc(p.remote().load(dst, length))).isEqualTo(crc(data));
    }

    @Test
    // One lane: both queue pairs and their acknowledgements share one connection, the load under which a
    // fixed acknowledgement timeout once made go-back-N collapse on containers (it backs off now).
    @WithSettings({"pagewire.nic.tlbEntries=32", "pagewire.nic.tlbWays=4", "pagewire.fabric.lanesPerPeer=1"})
    void pinOnMissNeverPinsMorePagesThanTheTlbHasEntries(PagewireCluster cluster) throws Exception {
        int entries = 32;
        Pagewire node1 = cluster.node(1).connect();
        Pagewire node2 = cluster.node(2).connect();
        Endpoint target = node2.openEndpoint("target");
        int length = 1024 * PAGE;
        long dst = target.allocate(2L * length);
        MemoryRegion dstRegion = target.register(dst, 2L * length, RegistrationMode.PIN_ON_MISS, Access.all());
        List<CompletableFuture<Completion>> writes = new ArrayList<>();
        List<QueuePair> qps = new ArrayList<>();
        List<Runnable> posts = new ArrayList<>();
        for (int i = 0; i < 2; i++) {
            Endpoint source = node1.openEndpoint("source-" + i);
            long src = source.allocate(length);
            source.store(src, pattern(i, length));
            MemoryRegion srcRegion = source.register(src, length, RegistrationMode.PIN_ON_MISS, Access.all());
            QueuePair qp = source.connect(target);
            qps.add(qp);
            long at = dst + (long) i * length;
            posts.add(() -> writes.add(qp.write(srcRegion, src, length, at, dstRegion.rkey())));
        }
        AtomicBoolean running = new AtomicBoolean(true);
        AtomicLong mostPinned = new AtomicLong();
        Pagewire sampling = cluster.node(2).connect();
        Thread sampler = new Thread(() -> {
            while (running.get()) {
                mostPinned.accumulateAndGet((long) total(sampling, "pagewire_memory_pages", "state=pinned"), Math::max);
            }
        }, "pinned-pages-sampler");
        sampler.start();
        try {
            posts.forEach(Runnable::run);
            for (int i = 0; i < writes.size(); i++) {
                qps.get(i).await(writes.get(i));
            }
        } finally {
            running.set(false);
            sampler.join();
        }
        assertThat(total(node2, "pagewire_tlb_misses_total", "mode=PIN_ON_MISS")).isGreaterThanOrEqualTo(2048);
        assertThat(mostPinned.get()).as("most pages pinned at once on the responder, sampled through its meters")
                .isLessThanOrEqualTo(entries);
        assertThat(total(node2, "pagewire_tlb_entries", "state=pinned")).isLessThanOrEqualTo(entries);
    }

    @Test
    @WithSettings({"pagewire.fabric.flowControlWindowBytes=65536", "pagewire.fabric.lanesPerPeer=1"})
    void aSmallFlowControlWindowMakesSendersWaitForTheirLane(PagewireCluster cluster) {
        Pair p = pair(cluster);
        int length = 8 << 20;
        long src = p.local().allocate(length);
        long dst = p.remote().allocate(length);
        byte[] data = pattern(6, length);
        p.local().store(src, data);
        MemoryRegion srcRegion = p.local().register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = p.remote().register(dst, length, RegistrationMode.PINNED, Access.all());
        p.qp().await(p.qp().write(srcRegion, src, length, dst, dstRegion.rkey()));
        assertThat(total(p.node1(), "pagewire_link_waits_total")).as("the lane pushed back").isPositive();
        assertThat(crc(p.remote().load(dst, length))).isEqualTo(crc(data));
    }

    @Test
    void prefetchBringsPagesInSoThatWritesNeverFault(PagewireCluster cluster) {
        Pair p = pair(cluster);
        int length = 128 * PAGE;
        long src = p.local().allocate(length);
        long dst = p.remote().allocate(length);
        MemoryRegion srcRegion = p.local().register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = p.remote().register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
        double residentBefore = total(p.node2(), "pagewire_memory_pages", "state=resident");
        dstRegion.advise(Advice.PREFETCH_NO_FAULT, dst, length);
        assertThat(total(p.node2(), "pagewire_memory_pages", "state=resident")).as("NO_FAULT brings nothing in").isEqualTo(residentBefore);
        dstRegion.advise(Advice.PREFETCH_WRITE, dst, length);
        assertThat(total(p.node2(), "pagewire_memory_pages", "state=resident") - residentBefore).isEqualTo(128);
        assertThat(total(p.node2(), "pagewire_prefetched_pages_total")).isEqualTo(128);
        p.qp().await(p.qp().write(srcRegion, src, length, dst, dstRegion.rkey()));
        assertThat(total(p.node2(), "pagewire_rnr_naks_sent_total")).isZero();
    }

    @Test
    void fetchAddReturnsEachPreviousValueOnce(PagewireCluster cluster) {
        Pagewire node1 = cluster.node(1).connect();
        Endpoint target = cluster.node(2).connect().openEndpoint("target");
        EventCounter counter = target.createEventCounter(EnumSet.of(Access.REMOTE_ATOMIC));
        QueuePair a = node1.openEndpoint("a").connect(target);
        QueuePair b = node1.openEndpoint("b").connect(target);
        List<CompletableFuture<Completion>> fromA = new ArrayList<>();
        List<CompletableFuture<Completion>> fromB = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            fromA.add(a.fetchAdd(counter.id(), 3));
            fromB.add(b.fetchAdd(counter.id(), 3));
        }
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 100; i++) {
            for (Completion done : List.of(a.await(fromA.get(i)), b.await(fromB.get(i)))) {
                assertThat(done.opcode()).isEqualTo(Opcode.FETCH_ADD);
                assertThat(seen.add(done.value())).as("previous value %d returned twice", done.value()).isTrue();
            }
        }
        assertThat(counter.value()).isEqualTo(600);
        assertThat(seen).allMatch(v -> v % 3 == 0 && v < 600);
    }

    @Test
    void anImplicitOnDemandRegionCoversTheWholeAddressSpace(PagewireCluster cluster) {
        Pair p = pair(cluster);
        MemoryRegion everything = p.remote().registerImplicit(Access.all());
        assertThat(everything.address()).isZero();
        long later = p.remote().allocate(3 * PAGE); // allocated after registration
        long src = p.local().allocate(PAGE);
        MemoryRegion srcRegion = p.local().register(src, PAGE, RegistrationMode.ON_DEMAND, Access.all());
        p.local().store(src, pattern(5, 100));
        p.qp().await(p.qp().write(srcRegion, src, 100, later + PAGE + 50, everything.rkey()));
        assertThat(p.remote().load(later + PAGE + 50, 100)).isEqualTo(pattern(5, 100));
    }
}
