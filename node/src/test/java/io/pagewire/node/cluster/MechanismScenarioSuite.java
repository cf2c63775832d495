package io.pagewire.node.cluster;

import static io.pagewire.node.TestData.pattern;
import static io.pagewire.node.TestData.crc;
import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.Timer;
import io.pagewire.kernel.KernelCounter;
import io.pagewire.kernel.StorageModel;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.metrics.Metric;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.node.nic.NicCounters;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Each mechanism shows in its counters: TLB misses, RNR NAKs, system-buffer parking, credit waits, pin bounds, prefetch. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
abstract class MechanismScenarioSuite extends ClusterFixture {
    private static final int PAGE = 4096;

    @Test
    void aSixtyFourEntryTlbMissesOnEveryPageOfAThousandPageWrite() throws Exception {
        start(2, context -> context.nic().tlbEntries(64).tlbWays(4));
        Connection c = connect(cluster.node(1), cluster.node(2));
        int length = 1000 * PAGE;
        long src = c.local().space().allocate(length);
        long dst = c.remote().space().allocate(length);
        c.remote().space().store(dst, new byte[length], 0, length); // resident: misses, not faults
        MemoryRegion srcRegion = c.local().register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = c.remote().register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
        c.local().space().store(src, pattern(1, length), 0, length);
        c.qp().post(WorkRequest.write(1, srcRegion.lkey(), src, length, dst, dstRegion.rkey()));
        awaitSuccess(c.cq());
        NicCounters responder = cluster.node(2).nic().counters();
        assertThat(responder.get(NicCounter.TLB_MISSES, RegistrationMode.ON_DEMAND)).isGreaterThanOrEqualTo(1000);
        assertThat(responder.get(NicCounter.TLB_EVICTIONS, RegistrationMode.ON_DEMAND)).isGreaterThanOrEqualTo(1000 - 64);
        assertThat(responder.get(NicCounter.RNR_NAKS_SENT)).as("every page was resident").isZero();
    }

    @Test
    void onDemandReceiveIntoSwappedOutPagesAnswersRnrNakAndTheSenderRetransmits() throws Exception {
        start(2, context -> {
            if (context.nodeId().equals("node-2")) {
                context.kernel().physicalMemoryBytes(4L << 20).swapBytes(64L << 20);
            }
        });
        Connection c = connect(cluster.node(1), cluster.node(2));
        int length = 512 * PAGE;
        long dst = c.remote().space().allocate(length);
        c.remote().space().store(dst, pattern(2, length), 0, length);
        long cold = c.remote().space().allocate(8L << 20);
        for (long at = cold; at < cold + (8L << 20); at += PAGE) {
            c.remote().space().touch(at, true); // pushes the destination out to swap
        }
        assertThat(c.remote().space().swappedPages()).isGreaterThan(400);
        long src = c.local().space().allocate(length);
        byte[] data = pattern(3, length);
        c.local().space().store(src, data, 0, length);
        MemoryRegion srcRegion = c.local().register(src, length, RegistrationMode.ON_DEMAND, Access.all());
        MemoryRegion dstRegion = c.remote().register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
        c.qp().post(WorkRequest.write(1, srcRegion.lkey(), src, length, dst, dstRegion.rkey()));
        awaitSuccess(c.cq());
        NicCounters requester = cluster.node(1).nic().counters();
        NicCounters responder = cluster.node(2).nic().counters();
        assertThat(responder.get(NicCounter.RNR_NAKS_SENT)).isPositive();
        assertThat(responder.get(NicCounter.RECEIVE_FAULTS_MAJOR, RegistrationMode.ON_DEMAND)).isPositive();
        Timer majorReceiveFaults = faultServiceTimer(cluster.node(2), "receive", "major");
        assertThat(majorReceiveFaults.count()).as("each major receive fault is timed")
                .isEqualTo(responder.get(NicCounter.RECEIVE_FAULTS_MAJOR, RegistrationMode.ON_DEMAND));
        assertThat(majorReceiveFaults.max(TimeUnit.NANOSECONDS)).as("a major fault waits at least the swap device's read latency")
                .isGreaterThanOrEqualTo((double) StorageModel.NVME.readLatencyNs());
        assertThat(requester.get(NicCounter.RNR_NAKS_RECEIVED)).isPositive();
        Timer rnrBackOffs = waitTimer(cluster.node(1), "rnr");
        assertThat(rnrBackOffs.count()).as("RNR back-offs timed").isPositive().isLessThanOrEqualTo(requester.get(NicCounter.RNR_NAKS_RECEIVED));
        assertThat(rnrBackOffs.max(TimeUnit.NANOSECONDS)).as("a back-off lasts at least the RNR delay the responder asked")
                .isGreaterThanOrEqualTo((double) Math.min(cluster.node(2).context().nic().rnrDelayNs(), 10_000_000_000L));
        assertThat(requester.get(NicCounter.RETRANSMITTED_PACKETS)).isPositive();
        // TLB lookups by side and transmission: each retransmitted packet looked its source page up
        // again (one page per packet here), apart from the 512 first lookups; the responder's misses
        // on first arrivals are counted apart from the lookups of the packets that came again.
        RegistrationMode od = RegistrationMode.ON_DEMAND;
        assertThat(requester.get(NicCounter.TLB_SOURCE_FIRST_HITS, od) + requester.get(NicCounter.TLB_SOURCE_FIRST_MISSES, od))
                .as("first lookups of the source pages").isGreaterThanOrEqualTo(512);
        assertThat(requester.get(NicCounter.TLB_SOURCE_AGAIN_HITS, od) + requester.get(NicCounter.TLB_SOURCE_AGAIN_MISSES, od))
                .as("lookups for retransmitted packets").isEqualTo(requester.get(NicCounter.RETRANSMITTED_PACKETS));
        assertThat(responder.get(NicCounter.TLB_DESTINATION_FIRST_MISSES, od)).as("first arrivals on swapped-out pages").isPositive();
        assertThat(responder.get(NicCounter.TLB_DESTINATION_AGAIN_HITS, od) + responder.get(NicCounter.TLB_DESTINATION_AGAIN_MISSES, od))
                .as("lookups for packets that came again").isPositive();
        assertThat(responder.get(NicCounter.TLB_SOURCE_FIRST_HITS, od) + responder.get(NicCounter.TLB_SOURCE_FIRST_MISSES, od))
                .as("a WRITE's target gathers nothing").isZero();
        // Per region, as rdma stat mr shows it: the target took the major faults and the bytes; the source sent them.
        assertThat(dstRegion.counters().majorFaults()).as("the target region's major faults")
                .isEqualTo(responder.get(NicCounter.RECEIVE_FAULTS_MAJOR, od));
        assertThat(dstRegion.counters().bytesReceived()).isEqualTo(length);
        assertThat(srcRegion.counters().bytesSent()).isEqualTo(length);
        assertThat(srcRegion.counters().bytesReceived() + dstRegion.counters().bytesSent()).isZero();
        byte[] landed = new byte[length];
        c.remote().space().load(dst, landed, 0, length);
        assertThat(crc(landed)).isEqualTo(crc(data));
    }

    @Test
    void shadowParksDataForNonResidentPagesAndSendersWaitForCredits() throws Exception {
        start(2, context -> {
            if (context.nodeId().equals("node-2")) {
                context.nic().creditsPerQp(4);
            }
        });
        Connection c = connect(cluster.node(1), cluster.node(2));
        int length = 256 * PAGE;
        long src = c.local().space().allocate(length);
        long dst = c.remote().space().allocate(length); // never touched: nothing resident
        byte[] data = pattern(4, length);
        c.local().space().store(src, data, 0, length);
        MemoryRegion srcRegion = c.local().register(src, length, RegistrationMode.SHADOW, Access.all());
        MemoryRegion dstRegion = c.remote().register(dst, length, RegistrationMode.SHADOW, Access.all());
        EventCounter done = c.remote().createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        c.qp().post(WorkRequest.writeWithNotify(1, srcRegion.lkey(), src, length, dst, dstRegion.rkey(), done.id()));
        awaitSuccess(c.cq());
        assertThat(done.await(1, 10, TimeUnit.SECONDS)).isEqualTo(1);
        PagewireNode responder = cluster.node(2);
        assertThat(responder.nic().counters().get(NicCounter.PARKED_PARTS, RegistrationMode.SHADOW)).isPositive();
        assertThat(responder.kernel().counters().get(KernelCounter.SYSTEM_BUFFER_PARKED)).isPositive();
        assertThat(responder.kernel().counters().get(KernelCounter.SYSTEM_BUFFER_DELIVERED))
                .isEqualTo(responder.kernel().counters().get(KernelCounter.SYSTEM_BUFFER_PARKED));
        assertThat(cluster.node(1).nic().counters().get(NicCounter.CREDIT_WAITS)).isPositive();
        assertThat(responder.kernel().systemBuffer().slotsInUse()).isZero();
        assertThat(waitTimer(responder, "system_buffer").count()).as("every parked part's time in the buffer")
                .isEqualTo(responder.nic().counters().get(NicCounter.PARKED_PARTS, RegistrationMode.SHADOW));
        assertThat(waitTimer(cluster.node(1), "credits").count()).as("credit waits that ended").isPositive()
                .isLessThanOrEqualTo(cluster.node(1).nic().counters().get(NicCounter.CREDIT_WAITS));
        byte[] landed = new byte[length];
        c.remote().space().load(dst, landed, 0, length);
        assertThat(crc(landed)).isEqualTo(crc(data));
    }

    @Test
    void pinOnMissNeverPinsMorePagesThanTheTlbHasEntries() throws Exception {
        int entries = 32;
        start(2, context -> {
            if (context.nodeId().equals("node-2")) {
                context.nic().tlbEntries(entries).tlbWays(4);
            }
        });
        PagewireNode responder = cluster.node(2);
        Endpoint target = responder.nic().openEndpoint("target");
        Connection first = connect(cluster.node(1).nic().openEndpoint("a"), target);
        Connection second = connect(cluster.node(1).nic().openEndpoint("b"), target);
        int length = 1024 * PAGE;
        long dst = target.space().allocate(2L * length);
        MemoryRegion dstRegion = target.register(dst, 2L * length, RegistrationMode.PIN_ON_MISS, Access.all());
        AtomicBoolean running = new AtomicBoolean(true);
        AtomicInteger mostPinned = new AtomicInteger();
        Thread sampler = new Thread(() -> {
            while (running.get()) {
                mostPinned.accumulateAndGet(responder.kernel().stats().pinnedPages(), Math::max);
                Thread.onSpinWait();
            }
        });
        sampler.start();
        try {
            int i = 0;
            for (Connection c : new Connection[] {first, second}) {
                long src = c.local().space().allocate(length);
                c.local().space().store(src, pattern(i, length), 0, length);
                MemoryRegion srcRegion = c.local().register(src, length, RegistrationMode.PIN_ON_MISS, Access.all());
                c.qp().post(WorkRequest.write(i, srcRegion.lkey(), src, length, dst + (long) i * length, dstRegion.rkey()));
                i++;
            }
            awaitSuccess(first.cq());
            awaitSuccess(second.cq());
        } finally {
            running.set(false);
            sampler.join();
        }
        assertThat(responder.nic().counters().get(NicCounter.TLB_MISSES, RegistrationMode.PIN_ON_MISS)).isGreaterThanOrEqualTo(2048);
        assertThat(mostPinned.get()).as("most pages pinned at once on the responder").isPositive().isLessThanOrEqualTo(entries);
        assertThat(responder.nic().tlbPinnedEntries()).isLessThanOrEqualTo(entries);
        assertThat(waitTimer(responder, "receive_stall").count()).as("lane stalls while PIN_ON_MISS pinned a target page")
                .isGreaterThanOrEqualTo(2048 - entries);
        long stalled = responder.nic().counters().get(NicCounter.RECEIVE_STALL_NANOS, RegistrationMode.PIN_ON_MISS);
        assertThat(responder.nic().receiveStallNanos("node-1")).as("the stalls charged to node-1's lanes, the only sender")
                .isPositive().isEqualTo(stalled);
        assertThat(responder.nic().receiveStallNanos("node-3")).as("a peer that sent nothing").isZero();
    }

    @Test
    void aSmallFlowControlWindowMakesSendersWaitForTheirLane() throws Exception {
        start(2, context -> context.fabric().flowControlWindowBytes(65536).lanesPerPeer(1));
        Connection c = connect(cluster.node(1), cluster.node(2));
        int length = 8 << 20;
        long src = c.local().space().allocate(length);
        long dst = c.remote().space().allocate(length);
        byte[] data = pattern(6, length);
        c.local().space().store(src, data, 0, length);
        MemoryRegion srcRegion = c.local().register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = c.remote().register(dst, length, RegistrationMode.PINNED, Access.all());
        c.qp().post(WorkRequest.write(1, srcRegion.lkey(), src, length, dst, dstRegion.rkey()));
        awaitSuccess(c.cq());
        assertThat(cluster.node(1).nic().counters().get(NicCounter.LINK_WAITS)).as("the lane pushed back").isPositive();
        byte[] landed = new byte[length];
        c.remote().space().load(dst, landed, 0, length);
        assertThat(crc(landed)).isEqualTo(crc(data));
    }

    @Test
    void prefetchBringsPagesInSoThatWritesNeverFault() throws Exception {
        start(2, context -> { });
        Connection c = connect(cluster.node(1), cluster.node(2));
        int length = 128 * PAGE;
        long src = c.local().space().allocate(length);
        long dst = c.remote().space().allocate(length);
        MemoryRegion srcRegion = c.local().register(src, length, RegistrationMode.PINNED, Access.all());
        MemoryRegion dstRegion = c.remote().register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
        c.remote().advise(dstRegion, dst, length, Endpoint.Advice.PREFETCH_NO_FAULT).get(10, TimeUnit.SECONDS);
        assertThat(c.remote().space().residentPages()).as("NO_FAULT brings nothing in").isZero();
        c.remote().advise(dstRegion, dst, length, Endpoint.Advice.PREFETCH_WRITE).get(10, TimeUnit.SECONDS);
        assertThat(c.remote().space().residentPages()).isEqualTo(128);
        assertThat(cluster.node(2).nic().counters().get(NicCounter.PREFETCHED_PAGES)).isEqualTo(128);
        NicCounters faults = cluster.node(2).nic().counters();
        assertThat(faults.get(NicCounter.PREFETCH_FAULTS_MINOR, RegistrationMode.ON_DEMAND)).as("prefetch faults, counted as such").isEqualTo(128);
        assertThat(faultServiceTimer(cluster.node(2), "prefetch", "minor").count()).isEqualTo(128);
        assertThat(dstRegion.counters().prefetchedPages()).as("the region's prefetched pages").isEqualTo(128);
        assertThat(dstRegion.counters().minorFaults()).isEqualTo(128);
        assertThat(srcRegion.counters().pins()).as("a PINNED registration pins every page").isEqualTo(128);
        assertThat(faultServiceTimer(cluster.node(2), "receive", "minor").count()).isZero();
        assertThat(faults.get(NicCounter.RECEIVE_FAULTS_MINOR, RegistrationMode.ON_DEMAND)
                + faults.get(NicCounter.RECEIVE_FAULTS_MAJOR, RegistrationMode.ON_DEMAND)).as("receive faults before any write").isZero();
        c.qp().post(WorkRequest.write(1, srcRegion.lkey(), src, length, dst, dstRegion.rkey()));
        awaitSuccess(c.cq());
        assertThat(cluster.node(2).nic().counters().get(NicCounter.RNR_NAKS_SENT)).isZero();
    }

    @Test
    void fetchAddReturnsEachPreviousValueOnce() throws Exception {
        start(2, context -> { });
        Endpoint target = cluster.node(2).nic().openEndpoint("target");
        EventCounter counter = target.createEventCounter(EnumSet.of(Access.REMOTE_ATOMIC));
        Connection a = connect(cluster.node(1).nic().openEndpoint("a"), target);
        Connection b = connect(cluster.node(1).nic().openEndpoint("b"), target);
        for (int i = 0; i < 100; i++) {
            a.qp().post(WorkRequest.fetchAdd(i, counter.id(), 3));
            b.qp().post(WorkRequest.fetchAdd(i, counter.id(), 3));
        }
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 100; i++) {
            for (Connection c : new Connection[] {a, b}) {
                Completion done = awaitSuccess(c.cq());
                assertThat(done.opcode()).isEqualTo(Completion.Opcode.FETCH_ADD);
                assertThat(seen.add(done.value())).as("previous value %d returned twice", done.value()).isTrue();
            }
        }
        assertThat(counter.value()).isEqualTo(600);
        assertThat(seen).allMatch(v -> v % 3 == 0 && v < 600);
    }

    @Test
    void anImplicitOnDemandRegionCoversTheWholeAddressSpace() throws Exception {
        start(2, context -> { });
        Connection c = connect(cluster.node(1), cluster.node(2));
        MemoryRegion everything = c.remote().registerImplicit(Access.all());
        assertThat(everything.address()).isZero();
        assertThat(everything.implicit()).isTrue();
        long later = c.remote().space().allocate(3 * PAGE); // allocated after registration
        long src = c.local().space().allocate(PAGE);
        MemoryRegion srcRegion = c.local().register(src, PAGE, RegistrationMode.ON_DEMAND, Access.all());
        c.local().space().store(src, pattern(5, 100), 0, 100);
        c.qp().post(WorkRequest.write(1, srcRegion.lkey(), src, 100, later + PAGE + 50, everything.rkey()));
        awaitSuccess(c.cq());
        byte[] landed = new byte[100];
        c.remote().space().load(later + PAGE + 50, landed, 0, 100);
        assertThat(landed).isEqualTo(pattern(5, 100));
    }

    /** A node's timer of the NIC's waits for one cause. */
    private static Timer waitTimer(PagewireNode node, String cause) {
        return node.registry().get(Metric.NIC_WAIT_TIME.meterName()).tag("cause", cause).timer();
    }

    /** A node's fault service timer for one origin and kind, as Prometheus scrapes it. */
    private static Timer faultServiceTimer(PagewireNode node, String origin, String kind) {
        return node.registry().get(Metric.FAULT_SERVICE_TIME.meterName()).tag("origin", origin).tag("kind", kind).timer();
    }
}
