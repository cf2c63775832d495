package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelContext;
import io.pagewire.node.TestData;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A node's per-session send allowance (pagewire.quota.sendBytesPerSecondPerSession): one session's
 * queue pairs together send no faster than the allowance, whatever their number, every byte still
 * lands, and another session on the same NIC is not held back by it; a queue pair's own rate limit
 * (ibv_modify_qp_rate_limit) paces that pair alone. Timing is asserted only from
 * below (pacing can only make a transfer slower), so a loaded machine cannot fail these.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SendPacingTest {
    private static final long MIB = 1 << 20;
    private static final long RATE = 8 * MIB;
    private static final long BURST = 256 << 10;

    private static TwoNics pacedA() {
        return new TwoNics(new KernelContext().physicalMemoryBytes(32 * MIB), new KernelContext().physicalMemoryBytes(32 * MIB),
                new NicContext().sendBytesPerSecondPerSession(RATE).sendBurstBytesPerSession(BURST), new NicContext());
    }

    @Test
    void twoQueuePairsOfOneSessionShareItsAllowanceAndEveryByteLands() throws Exception {
        try (TwoNics nics = pacedA()) {
            QueuePair second = nics.a.createQueuePair(nics.ea, nics.cqa);
            QueuePair secondPeer = nics.b.createQueuePair(nics.eb, nics.cqb);
            second.connect(secondPeer.address());
            secondPeer.connect(second.address());
            int size = (int) MIB;
            byte[] data = new byte[2 * size];
            new Random(7).nextBytes(data);
            long src = nics.ea.space().allocate(data.length);
            nics.ea.space().store(src, data, 0, data.length);
            MemoryRegion from = nics.ea.register(src, data.length, RegistrationMode.PINNED, Access.all());
            long dst = nics.eb.space().allocate(data.length);
            MemoryRegion to = nics.eb.register(dst, data.length, RegistrationMode.PINNED, Access.all());

            long start = System.nanoTime();
            nics.qa.post(WorkRequest.write(1, from.lkey(), src, size, dst, to.rkey()));
            second.post(WorkRequest.write(2, from.lkey(), src + size, size, dst + size, to.rkey()));
            nics.takeSuccess(nics.cqa, "the first pair's write");
            nics.takeSuccess(nics.cqa, "the second pair's write");
            long elapsedNs = System.nanoTime() - start;

            byte[] landed = new byte[data.length];
            nics.eb.space().load(dst, landed, 0, landed.length);
            assertThat(landed).isEqualTo(data);
            // 2 MiB less the first burst at 8 MiB/s: 219 ms at least, had each pair its own allowance 94 ms.
            long atLeastNs = (long) ((2.0 * size - BURST) / RATE * 1e9);
            assertThat(elapsedNs).as("2 MiB over two pairs of one session at 8 MiB/s" + nics.state()).isGreaterThanOrEqualTo(atLeastNs);
            assertThat(nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS)).as("the pairs waited for the allowance").isPositive();
            assertThat(nics.b.counters().get(NicCounter.RATE_LIMIT_WAITS)).as("b paces nothing").isZero();
        }
    }

    @Test
    void anotherSessionOnTheNodeIsNotHeldBackByAPacedOne() throws Exception {
        try (TwoNics nics = pacedA()) {
            int bulk = (int) (4 * MIB); // half a second at the allowance
            long src = nics.ea.space().allocate(bulk);
            MemoryRegion from = nics.ea.register(src, bulk, RegistrationMode.PINNED, Access.all());
            long dst = nics.eb.space().allocate(bulk);
            MemoryRegion to = nics.eb.register(dst, bulk, RegistrationMode.PINNED, Access.all());

            Endpoint other = nics.a.openEndpoint("other");
            CompletionQueue otherCq = nics.a.createCompletionQueue();
            QueuePair otherQp = nics.a.createQueuePair(other, otherCq);
            QueuePair otherPeer = nics.b.createQueuePair(nics.eb, nics.cqb);
            otherQp.connect(otherPeer.address());
            otherPeer.connect(otherQp.address());
            int small = 64 << 10; // within its own burst
            long otherSrc = other.space().allocate(small);
            MemoryRegion otherFrom = other.register(otherSrc, small, RegistrationMode.PINNED, Access.all());

            long paced = nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS);
            nics.qa.post(WorkRequest.write(1, from.lkey(), src, bulk, dst, to.rkey()));
            TestData.awaitTrue(() -> nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS) > paced, 10_000, "the bulk session is past its burst and pacing");
            otherQp.post(WorkRequest.write(2, otherFrom.lkey(), otherSrc, small, dst, to.rkey()));
            nics.takeSuccess(otherCq, "the other session's write");
            assertThat(nics.cqa.poll()).as("the paced session's 4 MiB is still on its way when the other's 64 KiB landed" + nics.state())
                    .isNull();
            nics.takeSuccess(nics.cqa, "the paced session's write");
        }
    }

    @Test
    void aQueuePairsOwnRateLimitPacesItAloneUntilRemoved() throws Exception {
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(32 * MIB), new KernelContext().physicalMemoryBytes(32 * MIB),
                new NicContext(), new NicContext())) {
            QueuePair unlimited = nics.a.createQueuePair(nics.ea, nics.cqa);
            QueuePair unlimitedPeer = nics.b.createQueuePair(nics.eb, nics.cqb);
            unlimited.connect(unlimitedPeer.address());
            unlimitedPeer.connect(unlimited.address());
            int size = (int) (2 * MIB);
            long src = nics.ea.space().allocate(size);
            MemoryRegion from = nics.ea.register(src, size, RegistrationMode.PINNED, Access.all());
            long dst = nics.eb.space().allocate(size);
            MemoryRegion to = nics.eb.register(dst, size, RegistrationMode.PINNED, Access.all());

            nics.qa.rateLimit(RATE, BURST);
            long start = System.nanoTime();
            long paced = nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS);
            nics.qa.post(WorkRequest.write(1, from.lkey(), src, size, dst, to.rkey()));
            TestData.awaitTrue(() -> nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS) > paced, 10_000, "the limited pair is past its burst");
            unlimited.post(WorkRequest.write(2, from.lkey(), src, (int) MIB, dst, to.rkey()));
            Completion first = nics.takeSuccess(nics.cqa, "the first write to complete");
            assertThat(first.wrId()).as("the pair without a limit finished first" + nics.state()).isEqualTo(2);
            nics.takeSuccess(nics.cqa, "the limited pair's write");
            long atLeastNs = (long) ((size - BURST) / (double) RATE * 1e9);
            assertThat(System.nanoTime() - start).as("2 MiB at 8 MiB/s" + nics.state()).isGreaterThanOrEqualTo(atLeastNs);

            nics.qa.rateLimit(0, 0);
            long waits = nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS);
            nics.qa.post(WorkRequest.write(3, from.lkey(), src, size, dst, to.rkey()));
            nics.takeSuccess(nics.cqa, "a write after the limit was removed");
            assertThat(nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS)).as("no wait once the limit is gone").isEqualTo(waits);
        }
    }

    @Test
    void aRateLimitThatIsNegativeOrHasAnAbsurdBurstIsRefused() {
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(MIB), new KernelContext().physicalMemoryBytes(MIB),
                new NicContext(), new NicContext())) {
            assertThatThrownBy(() -> nics.qa.rateLimit(-1, 0)).isInstanceOf(NicException.class)
                    .hasMessageContaining("a rate limit is 0 (none) or a positive number of bytes per second")
                    .hasMessageContaining(Long.toUnsignedString(-1L));
            assertThatThrownBy(() -> nics.qa.rateLimit(RATE, 2L << 30)).isInstanceOf(NicException.class)
                    .hasMessageContaining("with a burst of 0 (the node's) to 1073741824 bytes");
        }
    }

    @Test
    void aPairLimitedToACrawlSleepsInStepsAndClosesWithoutWaitingForItsRate() throws Exception {
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(8 * MIB), new KernelContext().physicalMemoryBytes(8 * MIB),
                new NicContext(), new NicContext())) {
            int size = 64 << 10;
            long src = nics.ea.space().allocate(size);
            MemoryRegion from = nics.ea.register(src, size, RegistrationMode.PINNED, Access.all());
            long dst = nics.eb.space().allocate(size);
            MemoryRegion to = nics.eb.register(dst, size, RegistrationMode.PINNED, Access.all());
            nics.qa.rateLimit(1, 4096); // a byte per second: the second packet would wait over an hour
            nics.qa.post(WorkRequest.write(1, from.lkey(), src, size, dst, to.rkey()));
            long waits = 0;
            for (long deadline = System.nanoTime() + 10_000_000_000L; waits < 3 && System.nanoTime() < deadline; Thread.sleep(20)) {
                waits = nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS);
            }
            assertThat(waits).as("the pair looked at its allowance again every 100 ms" + nics.state()).isGreaterThanOrEqualTo(3);
            nics.qa.close();
            Completion flushed = nics.take(nics.cqa, "the crawling write, flushed by the close");
            assertThat(flushed.status()).isEqualTo(CompletionStatus.FLUSHED);
            // The pair's last step ends within 100 ms; a closed pair schedules no further one.
            assertThat(nics.timersA.awaitIdle(10, TimeUnit.SECONDS)).as("a closed pair sleeps no more" + nics.state()).isTrue();
            assertThat(nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS)).as("the waits counted while it slept").isGreaterThanOrEqualTo(waits);
        }
    }

    @Test
    void withoutAnAllowanceNothingWaits() throws Exception {
        try (TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(8 * MIB), new KernelContext().physicalMemoryBytes(8 * MIB),
                new NicContext(), new NicContext())) {
            int size = (int) MIB;
            long src = nics.ea.space().allocate(size);
            MemoryRegion from = nics.ea.register(src, size, RegistrationMode.PINNED, Access.all());
            long dst = nics.eb.space().allocate(size);
            MemoryRegion to = nics.eb.register(dst, size, RegistrationMode.PINNED, Access.all());
            nics.qa.post(WorkRequest.write(1, from.lkey(), src, size, dst, to.rkey()));
            nics.takeSuccess(nics.cqa, "the write");
            assertThat(nics.a.counters().get(NicCounter.RATE_LIMIT_WAITS)).isZero();
        }
    }
}
