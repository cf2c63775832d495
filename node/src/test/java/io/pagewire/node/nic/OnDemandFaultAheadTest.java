package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelContext;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * An ON_DEMAND responder's receive fault covers the rest of the operation, as mlx5's responder fault
 * handler does: one RDMA WRITE onto 64 missing pages costs an RNR NAK or two, not one per page (and a
 * go-back-N resend each); a SEND into a missing receive buffer faults the whole buffer. The responder's
 * RNR delay is long here (20 ms), so every fault ahead is in before the resend, however slow the machine.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class OnDemandFaultAheadTest {
    private static final int PAGE = 4096;
    private static final int PAGES = 64;

    private static TwoNics nics() {
        return new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20), new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(8 << 20),
                new NicContext(), new NicContext().rnrDelayNs(20_000_000L));
    }

    @Test
    void oneWriteOntoMissingPagesIsNakedOnceOrTwiceNotOncePerPage() throws Exception {
        try (TwoNics nics = nics()) {
            int length = PAGES * PAGE;
            byte[] data = new byte[length];
            new Random(11).nextBytes(data);
            long src = nics.ea.space().allocate(length);
            nics.ea.space().store(src, data, 0, length);
            MemoryRegion from = nics.ea.register(src, length, RegistrationMode.PINNED, Access.all());
            long dst = nics.eb.space().allocate(length + PAGE);
            MemoryRegion to = nics.eb.register(dst, length + PAGE, RegistrationMode.ON_DEMAND, Access.all());
            // Never touched: every destination page faults (minor: it gets its first frame).
            nics.qa.post(WorkRequest.write(1, from.lkey(), src, length, dst, to.rkey()));
            nics.takeSuccess(nics.cqa, "the write onto 64 missing pages");

            byte[] landed = new byte[length];
            nics.eb.space().load(dst, landed, 0, length);
            assertThat(landed).isEqualTo(data);
            long faults = nics.b.counters().get(NicCounter.RECEIVE_FAULTS_MINOR) + nics.b.counters().get(NicCounter.RECEIVE_FAULTS_MAJOR);
            assertThat(faults).as("every page of the message faulted once, and none past it" + nics.state()).isEqualTo(PAGES);
            assertThat(nics.eb.space().isResident((dst + length) >>> 12)).as("the page after the message stays out").isFalse();
            assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).as("RNR NAKs for 64 missing pages" + nics.state()).isBetween(1L, 4L);
        }
    }

    @Test
    void aSendIntoAMissingReceiveBufferFaultsTheWholeBuffer() throws Exception {
        try (TwoNics nics = nics()) {
            int length = PAGES * PAGE;
            long src = nics.ea.space().allocate(length);
            nics.ea.space().store(src, new byte[length], 0, length);
            MemoryRegion from = nics.ea.register(src, length, RegistrationMode.PINNED, Access.all());
            long buffer = nics.eb.space().allocate(length);
            MemoryRegion buffers = nics.eb.register(buffer, length, RegistrationMode.ON_DEMAND, Access.all());
            nics.qb.postReceive(new ReceiveRequest(7, buffers.lkey(), buffer, length));
            nics.qa.post(WorkRequest.send(1, from.lkey(), src, length));
            nics.takeSuccess(nics.cqa, "the SEND into a missing buffer");
            nics.takeSuccess(nics.cqb, "its receive");
            assertThat(nics.b.counters().get(NicCounter.RECEIVE_BUFFER_RNR_NAKS_SENT)).as("RNR NAKs for a 64-page buffer" + nics.state())
                    .isBetween(1L, 4L);
        }
    }
}
