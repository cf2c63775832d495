package io.pagewire.node.nic;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.FaultKind;
import io.pagewire.kernel.KernelContext;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * When a NIC faults: an ON_DEMAND NIC translates only what its own page table maps (the pages resident
 * at registration, those it faulted in, those prefetched), so a page the program touched after
 * registering costs a NIC page fault though it is in memory, as on mlx5; and the injected memory
 * pressure that fault experiments use takes a page from the NIC just after a peer touched it, so the
 * next touch faults minor (its translation gone) or major (the page in swap).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NicPageFaultsTest {
    private static final int PAGE = 4096;
    private static final int PAGES = 8;

    private static TwoNics nics() {
        return new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20), new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(8 << 20),
                new NicContext(), new NicContext().rnrDelayNs(1_000_000L));
    }

    private static long receiveFaults(TwoNics nics, FaultKind kind) {
        return nics.b.counters().get(kind == FaultKind.MINOR ? NicCounter.RECEIVE_FAULTS_MINOR : NicCounter.RECEIVE_FAULTS_MAJOR);
    }

    private static MemoryRegion source(TwoNics nics, int length) {
        long src = nics.ea.space().allocate(length);
        nics.ea.space().store(src, new byte[length], 0, length);
        return nics.ea.register(src, length, RegistrationMode.PINNED, Access.all());
    }

    @Test
    void anOnDemandRegionMapsThePagesResidentAtRegistrationAndFaultsOnThoseTouchedAfter() throws Exception {
        try (TwoNics nics = nics()) {
            int length = PAGES * PAGE;
            MemoryRegion from = source(nics, length);
            long early = nics.eb.space().allocate(length);
            nics.eb.space().store(early, new byte[length], 0, length);
            MemoryRegion resident = nics.eb.register(early, length, RegistrationMode.ON_DEMAND, Access.all());
            nics.qa.post(WorkRequest.write(1, from.lkey(), from.address(), length, early, resident.rkey()));
            nics.takeSuccess(nics.cqa, "the write onto pages resident at registration");
            assertThat(receiveFaults(nics, FaultKind.MINOR) + receiveFaults(nics, FaultKind.MAJOR)).as("faults" + nics.state()).isZero();
            assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).isZero();

            long late = nics.eb.space().allocate(length);
            MemoryRegion touchedAfter = nics.eb.register(late, length, RegistrationMode.ON_DEMAND, Access.all());
            nics.eb.space().store(late, new byte[length], 0, length); // in memory now, but the NIC has not mapped them
            nics.qa.post(WorkRequest.write(2, from.lkey(), from.address(), length, late, touchedAfter.rkey()));
            nics.takeSuccess(nics.cqa, "the write onto pages touched after registration");
            assertThat(receiveFaults(nics, FaultKind.MINOR)).as("one minor NIC fault per page" + nics.state()).isEqualTo(PAGES);
            assertThat(receiveFaults(nics, FaultKind.MAJOR)).isZero();
            assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).as("RNR NAKs" + nics.state()).isBetween(1L, 4L);
        }
    }

    @Test
    void aPrefetchMapsPagesSoTheFirstWriteDoesNotFault() throws Exception {
        try (TwoNics nics = nics()) {
            int length = PAGES * PAGE;
            MemoryRegion from = source(nics, length);
            long late = nics.eb.space().allocate(length);
            MemoryRegion region = nics.eb.register(late, length, RegistrationMode.ON_DEMAND, Access.all());
            nics.eb.space().store(late, new byte[length], 0, length);
            nics.eb.advise(region, late, length, Endpoint.Advice.PREFETCH_WRITE).get(10, TimeUnit.SECONDS);
            nics.qa.post(WorkRequest.write(1, from.lkey(), from.address(), length, late, region.rkey()));
            nics.takeSuccess(nics.cqa, "the write onto prefetched pages");
            assertThat(receiveFaults(nics, FaultKind.MINOR) + receiveFaults(nics, FaultKind.MAJOR)).as("faults" + nics.state()).isZero();
            assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).isZero();
        }
    }

    /**
     * Writes one page of a new region {@code writes} times, letting each page-out a MAJOR pressure draws
     * finish before the next write (a MINOR take waits for the next touch; a PINNED page is never taken).
     *
     * @return the page's address
     */
    private static long writeOnePageRepeatedly(TwoNics nics, RegistrationMode mode, int writes) throws Exception {
        MemoryRegion from = source(nics, PAGE);
        long dst = nics.eb.space().allocate(PAGE);
        nics.eb.space().store(dst, new byte[PAGE], 0, PAGE);
        MemoryRegion to = nics.eb.register(dst, PAGE, mode, Access.all());
        boolean awaitTakes = nics.b.memoryPressure().depth() == FaultKind.MAJOR && mode != RegistrationMode.PINNED;
        long takenBefore = nics.b.counters().get(NicCounter.PRESSURE_RECLAIMS, mode);
        for (int i = 1; i <= writes; i++) {
            nics.qa.post(WorkRequest.write(i, from.lkey(), from.address(), PAGE, dst, to.rkey()));
            nics.takeSuccess(nics.cqa, "write " + i);
            if (awaitTakes) {
                long taken = takenBefore + i;
                awaitTrue(() -> nics.b.counters().get(NicCounter.PRESSURE_RECLAIMS, mode) == taken, 10_000, "the page paged out after write " + i);
            }
        }
        return dst;
    }

    @Test
    void minorPressureMakesEveryNextTouchAMinorFaultOnDemandAndAPinOnMissMiss() throws Exception {
        try (TwoNics nics = nics()) {
            nics.b.memoryPressure().set(1.0, FaultKind.MINOR);
            writeOnePageRepeatedly(nics, RegistrationMode.ON_DEMAND, 6);
            // The first write found the page mapped at registration; each later one found it taken.
            assertThat(receiveFaults(nics, FaultKind.MINOR)).as("minor faults" + nics.state()).isEqualTo(5);
            assertThat(receiveFaults(nics, FaultKind.MAJOR)).isZero();
            assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).as("an RNR NAK per fault (more for a resend that comes while its fault is served)" + nics.state()).isGreaterThanOrEqualTo(5);
            assertThat(nics.b.counters().get(NicCounter.PRESSURE_RECLAIMS)).as("taken when the next write came").isEqualTo(5);

            long misses = nics.b.counters().get(NicCounter.TLB_DESTINATION_FIRST_MISSES, RegistrationMode.PIN_ON_MISS);
            writeOnePageRepeatedly(nics, RegistrationMode.PIN_ON_MISS, 6);
            assertThat(nics.b.counters().get(NicCounter.TLB_DESTINATION_FIRST_MISSES, RegistrationMode.PIN_ON_MISS) - misses)
                    .as("every write misses the TLB and pins again" + nics.state()).isEqualTo(6);
            assertThat(nics.kernelB.stats().pinnedPages()).as("pinned: the one page in the TLB, each earlier pin taken with its entry").isEqualTo(1);
        }
    }

    @Test
    void majorPressurePagesThePageOutSoTheNextTouchReadsItFromSwap() throws Exception {
        try (TwoNics nics = nics()) {
            nics.b.memoryPressure().set(1.0, FaultKind.MAJOR);
            writeOnePageRepeatedly(nics, RegistrationMode.ON_DEMAND, 4);
            assertThat(receiveFaults(nics, FaultKind.MAJOR)).as("major faults" + nics.state()).isEqualTo(3);
            awaitTrue(() -> nics.kernelB.stats().swappedPages() == 1, 10_000, "the page in swap after the last write (its write-back done)");

            long majors = receiveFaults(nics, FaultKind.MAJOR);
            long taken = nics.b.counters().get(NicCounter.PRESSURE_RECLAIMS);
            long dst = writeOnePageRepeatedly(nics, RegistrationMode.PINNED, 3);
            // The takes those touches drew run on the kernel's fault handlers: done once none is under way.
            awaitTrue(() -> !nics.b.memoryPressure().pagingOut(), 10_000, "the pressure's takes of the pinned page ended");
            assertThat(receiveFaults(nics, FaultKind.MAJOR)).as("a pinned page is never taken").isEqualTo(majors);
            assertThat(nics.eb.space().isResident(dst >>> 12)).isTrue();
            assertThat(nics.b.counters().get(NicCounter.PRESSURE_RECLAIMS)).as("nor counted as taken").isEqualTo(taken);
        }
    }

    @Test
    void underTheDropAnswerAFaultIsBroughtBackByTheRequestersTimeoutNotAnRnrNak() throws Exception {
        long timeoutNs = 30_000_000L;
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20), new KernelContext().physicalMemoryBytes(4 << 20),
                new NicContext().ackTimeoutNs(timeoutNs), new NicContext().rnrDelayNs(1_000_000L).faultAnswer(FaultAnswer.DROP))) {
            nics.b.memoryPressure().set(1.0, FaultKind.MINOR);
            long start = System.nanoTime();
            writeOnePageRepeatedly(nics, RegistrationMode.ON_DEMAND, 4);
            long elapsed = System.nanoTime() - start;
            assertThat(receiveFaults(nics, FaultKind.MINOR)).as("minor faults" + nics.state()).isEqualTo(3);
            assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).as("no RNR NAK under DROP").isZero();
            assertThat(nics.b.counters().get(NicCounter.FAULT_DROPPED_REQUESTS)).as("a dropped request per fault" + nics.state()).isEqualTo(3);
            assertThat(nics.a.counters().get(NicCounter.ACK_TIMEOUTS)).as("each fault recovered by a timeout" + nics.state()).isEqualTo(3);
            assertThat(elapsed).as("three timeouts waited").isGreaterThanOrEqualTo(3 * timeoutNs);

            nics.b.faultAnswer(FaultAnswer.RNR_NAK);
            long timeouts = nics.a.counters().get(NicCounter.ACK_TIMEOUTS);
            writeOnePageRepeatedly(nics, RegistrationMode.ON_DEMAND, 3);
            assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).as("RNR NAKs once the answer is RNR_NAK again").isGreaterThanOrEqualTo(2);
            assertThat(nics.a.counters().get(NicCounter.ACK_TIMEOUTS)).as("and no further timeout" + nics.state()).isEqualTo(timeouts);
        }
    }
}
