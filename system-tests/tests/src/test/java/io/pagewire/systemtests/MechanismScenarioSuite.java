package io.pagewire.systemtests;

import static io.pagewire.node.TestData.crc;
import static io.pagewire.node.TestData.pattern;
import static io.pagewire.systemtests.ClusterChecks.total;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

import io.pagewire.client.Access;
import io.pagewire.client.Advice;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Opcode;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegionStats;
import io.pagewire.client.RegistrationMode;
import io.pagewire.kernel.StorageModel;
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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

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
        double majorFaults = total(p.node2(), "pagewire_nic_page_faults_total", "side=receive", "kind=major", "mode=ON_DEMAND");
        assertThat(total(p.node2(), "pagewire_nic_fault_service_seconds_count", "origin=receive", "kind=major"))
                .as("each major receive fault is timed").isEqualTo(majorFaults);
        assertThat(total(p.node2(), "pagewire_nic_fault_service_seconds_max", "origin=receive", "kind=major"))
                .as("a major fault waits at least the swap device's read latency")
                .isGreaterThanOrEqualTo(StorageModel.NVME.readLatencyNs() / 1e9);
        double rnrReceived = total(p.node1(), "pagewire_rnr_naks_received_total");
        assertThat(total(p.node1(), "pagewire_nic_wait_seconds_count", "cause=rnr")).as("RNR back-offs timed")
                .isPositive().isLessThanOrEqualTo(rnrReceived);
        double retransmitted = total(p.node1(), "pagewire_retransmitted_packets_total");
        assertThat(retransmitted).isPositive();
        // TLB lookups by side and transmission: each retransmitted packet looked its source page up
        // again (one page per packet here), apart from the 512 first lookups; the responder's misses on
        // first arrivals are counted apart from the lookups of the packets that came again.
        assertThat(total(p.node1(), "pagewire_tlb_lookups_total", "side=source", "transmission=first", "mode=ON_DEMAND"))
                .as("first lookups of the source pages").isGreaterThanOrEqualTo(512);
        assertThat(total(p.node1(), "pagewire_tlb_lookups_total", "side=source", "transmission=retransmission", "mode=ON_DEMAND"))
                .as("lookups for retransmitted packets").isEqualTo(retransmitted);
        assertThat(total(p.node2(), "pagewire_tlb_lookups_total", "side=destination", "transmission=first", "result=miss", "mode=ON_DEMAND"))
                .as("first arrivals on swapped-out pages").isPositive();
        assertThat(total(p.node2(), "pagewire_tlb_lookups_total", "side=destination", "transmission=retransmission", "mode=ON_DEMAND"))
                .as("lookups for packets that came again").isPositive();
        assertThat(total(p.node2(), "pagewire_tlb_lookups_total", "side=source", "mode=ON_DEMAND")).as("a WRITE's target gathers nothing").isZero();
        // Per region, as rdma stat mr shows it: the target took the major faults and the bytes; the source sent them.
        RegionStats target = dstRegion.stats();
        RegionStats source = srcRegion.stats();
        assertThat(target.majorFaults()).as("the target region's major faults").isEqualTo((long) majorFaults);
        assertThat(target.bytesReceived()).isEqualTo(length);
        assertThat(source.bytesSent()).isEqualTo(length);
        assertThat(source.bytesReceived() + target.bytesSent()).isZero();
        assertThat(crc(p.remote().load(dst, length))).isEqualTo(crc(data));
    }

    /**
     * A source page that went to swap after its data was written comes back through the NIC's own
     * fault, counted on the sending side: a WRITE's source at the requester, a READ's source at the
     * responder (its fault service timed as origin read_source). Each page faults once, from swap.
     */
    @ParameterizedTest
    @EnumSource(value = RegistrationMode.class, names = {"SHADOW", "ON_DEMAND"})
    void sourcePagesOutInSwapFaultOnTheSendingSide(RegistrationMode mode, PagewireCluster cluster) {
        Pair p = pair(cluster);
        int pages = 16;
        int length = pages * PAGE;
        byte[] data = pattern(8, length);
        long src = p.local().allocate(length);
        p.local().store(src, data);
        MemoryRegion srcRegion = p.local().register(src, length, mode, Access.all());
        long dst = p.remote().allocate(length);
        MemoryRegion dstRegion = p.remote().register(dst, length, RegistrationMode.PINNED, Access.all());
        assertThat(p.local().pageOut(src, length)).as("the source went to swap").isEqualTo(pages);
        double before = total(p.node1(), "pagewire_nic_page_faults_total", "side=send", "kind=major", "mode=" + mode);
        p.qp().await(p.qp().write(srcRegion, src, length, dst, dstRegion.rkey()));
        assertThat(total(p.node1(), "pagewire_nic_page_faults_total", "side=send", "kind=major", "mode=" + mode) - before)
                .as("the WRITE's source pages, each faulted in from swap by the requester's NIC").isEqualTo(pages);
        assertThat(srcRegion.stats().majorFaults()).isEqualTo(pages);
        assertThat(crc(p.remote().load(dst, length))).isEqualTo(crc(data));

        // The other way: a READ whose source, on the responder, is in swap.
        long readSource = p.remote().allocate(length);
        p.remote().store(readSource, data);
        MemoryRegion readSourceRegion = p.remote().register(readSource, length, mode, Access.all());
        assertThat(p.remote().pageOut(readSource, length)).isEqualTo(pages);
        long into = p.local().allocate(length);
        MemoryRegion intoRegion = p.local().register(into, length, RegistrationMode.PINNED, Access.all());
        double responderBefore = total(p.node2(), "pagewire_nic_page_faults_total", "side=send", "kind=major", "mode=" + mode);
        p.qp().await(p.qp().read(intoRegion, into, length, readSource, readSourceRegion.rkey()));
        assertThat(total(p.node2(), "pagewire_nic_page_faults_total", "side=send", "kind=major", "mode=" + mode) - responderBefore)
                .as("the READ's source pages, faulted in by the responder's NIC").isEqualTo(pages);
        assertThat(total(p.node2(), "pagewire_nic_fault_service_seconds_count", "origin=read_source", "kind=major")).isEqualTo(pages);
        assertThat(crc(p.local().load(into, length))).isEqualTo(crc(data));
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
        assertThat(total(p.node2(), "pagewire_system_buffer_parts_total", "event=delivered"))
                .isEqualTo(total(p.node2(), "pagewire_system_buffer_parts_total", "event=parked")).isPositive();
        assertThat(total(p.node2(), "pagewire_nic_wait_seconds_count", "cause=system_buffer")).as("every parked part's time in the buffer")
                .isEqualTo(total(p.node2(), "pagewire_parked_parts_total", "mode=SHADOW"));
        double creditWaits = total(p.node1(), "pagewire_credit_waits_total");
        assertThat(creditWaits).isPositive();
        assertThat(total(p.node1(), "pagewire_nic_wait_seconds_count", "cause=credits")).as("credit waits that ended")
                .isPositive().isLessThanOrEqualTo(creditWaits);
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
        assertThat(total(node2, "pagewire_nic_wait_seconds_count", "cause=receive_stall")).as("lane stalls while PIN_ON_MISS pinned a target page")
                .isGreaterThanOrEqualTo(2048 - entries);
        double stalled = total(node2, "pagewire_receive_stall_seconds_total"); // PIN_ON_MISS's alone
        assertThat(total(node2, "pagewire_link_receive_stall_seconds_total", "peer=node-1"))
                .as("the stalls charged to node-1's lanes, the only sender").isPositive().isCloseTo(stalled, within(1e-6));
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
        assertThat(total(p.node2(), "pagewire_nic_page_faults_total", "side=prefetch", "kind=minor", "mode=ON_DEMAND"))
                .as("prefetch faults, counted as such").isEqualTo(128);
        assertThat(total(p.node2(), "pagewire_nic_fault_service_seconds_count", "origin=prefetch", "kind=minor")).isEqualTo(128);
        assertThat(dstRegion.stats().prefetchedPages()).as("the region's prefetched pages").isEqualTo(128);
        assertThat(dstRegion.stats().minorFaults()).isEqualTo(128);
        assertThat(srcRegion.stats().pins()).as("a PINNED registration pins every page").isEqualTo(128);
        assertThat(total(p.node2(), "pagewire_nic_page_faults_total", "side=receive", "mode=ON_DEMAND")).as("receive faults before any write").isZero();
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
