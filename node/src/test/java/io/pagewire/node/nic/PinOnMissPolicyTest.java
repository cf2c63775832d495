package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** PIN_ON_MISS when the TLB has no way to give: the page is translated without an entry, not refused. */
class PinOnMissPolicyTest {
    private final KernelAgent kernel = KernelAgent.start(new KernelContext().name("k").physicalMemoryBytes(1 << 20));
    private final Nic nic = new Nic("k", kernel, new NicContext().tlbEntries(1).tlbWays(1), NicTimers.threaded("k"), null);

    @AfterEach
    void close() {
        nic.close();
        kernel.close();
    }

    @Test
    void aMissWhoseSetIsAllBeingFilledTranslatesWithoutAnEntryAndKeepsNoPin() {
        Endpoint endpoint = nic.openEndpoint("e");
        long address = endpoint.space().allocate(2 * 4096);
        endpoint.space().store(address + 4096, new byte[] {42}, 0, 1);
        MemoryRegion region = endpoint.register(address, 2 * 4096, RegistrationMode.PIN_ON_MISS, Access.all());
        long vpn = (address >>> 12) + 1;
        // Another miss holds the only way of the only set while it is being filled.
        Tlb.Reservation other = nic.tlb().reserve(Tlb.key(endpoint.id(), vpn - 1));
        assertThat(other).isNotNull();

        long t = nic.dma().acquire(region, vpn, false, Side.SEND, false, null);
        assertThat(t).as("translated, not refused").isNotEqualTo(RegionPolicy.NOT_RESIDENT);
        byte[] read = new byte[1];
        nic.dma().memory().read(Tlb.frameOf(t), 0, read, 0, 1);
        nic.dma().release(t, false);
        assertThat(read[0]).isEqualTo((byte) 42);
        assertThat(nic.counters().get(NicCounter.TLB_BYPASSES)).isEqualTo(1);
        assertThat(endpoint.space().pinCount(vpn)).as("no pin kept without an entry to release it").isZero();
        assertThat(nic.tlbPinnedEntries()).isZero();
        nic.tlb().cancel(other);
    }

    @Test
    void aTlbLargerThanThePinLimitUnpinsItsOldestEntriesInsteadOfFailing() throws Exception {
        // 64 TLB entries, but the node lets only 16 pages be pinned: U-Net/MM's kernel would unpin to make room.
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20),
                new KernelContext().physicalMemoryBytes(4 << 20).nodePinLimitBytes(16 * 4096).memlockLimitBytes(16 * 4096),
                new NicContext(), new NicContext().tlbEntries(64).tlbWays(8))) {
            int pages = 256;
            long src = nics.ea.space().allocate(4096);
            MemoryRegion from = nics.ea.register(src, 4096, RegistrationMode.PINNED, Access.all());
            long dst = nics.eb.space().allocate(pages * 4096L);
            MemoryRegion to = nics.eb.register(dst, pages * 4096L, RegistrationMode.PIN_ON_MISS, Access.all());
            for (int p = 0; p < pages; p++) {
                nics.qa.post(WorkRequest.write(p, from.lkey(), src, 64, dst + p * 4096L, to.rkey()));
                nics.takeSuccess(nics.cqa, "write " + p);
                assertThat(nics.kernelB.stats().pinnedPages()).as("pins stay within the node's limit").isLessThanOrEqualTo(16);
            }
            assertThat(nics.b.tlbPinnedEntries()).isLessThanOrEqualTo(16);
        }
    }

    @Test
    void aPinTheNicNoLongerHoldsIsCountedWhileAFreedPageIsNot() {
        Endpoint endpoint = nic.openEndpoint("e");
        long address = endpoint.space().allocate(2 * 4096);
        MemoryRegion region = endpoint.register(address, 2 * 4096, RegistrationMode.PIN_ON_MISS, Access.all());
        long vpn = address >>> 12;
        nic.dma().release(nic.dma().acquire(region, vpn, true, Side.RECEIVE, false, null), true);
        assertThat(endpoint.space().pinCount(vpn)).as("the TLB entry holds a pin").isEqualTo(1);
        endpoint.space().unpin(vpn); // someone else gave the NIC's pin back: the accounting is now wrong
        endpoint.deregister(region); // drops the entry, whose pin the NIC releases
        assertThat(nic.counters().get(NicCounter.PIN_ACCOUNTING_ERRORS)).as("the bug's one signal is kept").isEqualTo(1);

        MemoryRegion again = endpoint.register(address, 2 * 4096, RegistrationMode.PIN_ON_MISS, Access.all());
        nic.dma().release(nic.dma().acquire(again, vpn + 1, true, Side.RECEIVE, false, null), true);
        endpoint.space().free(address); // freeing revokes the pins; the entry's later release is not a bug
        nic.dropTranslations(endpoint.space(), vpn, 2);
        assertThat(nic.counters().get(NicCounter.PIN_ACCOUNTING_ERRORS)).isEqualTo(1);
    }

    @Test
    void aTimerTaskThatThrowsIsCountedAndTheTimersGoOn() throws Exception {
        CountDownLatch later = new CountDownLatch(1);
        nic.timers().schedule(1_000, () -> {
            throw new IllegalStateException("a broken task");
        });
        nic.timers().schedule(2_000_000, later::countDown);
        assertThat(later.await(10, TimeUnit.SECONDS)).isTrue();
        assertThat(nic.counters().get(NicCounter.TIMER_TASK_FAILURES)).isEqualTo(1);
    }
}
