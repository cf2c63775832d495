package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** A queue pair between two endpoints of one node carries traffic (it used to connect, then end in RETRY_EXCEEDED). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SameNodeQueuePairTest {
    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void writesReadsAndSendsBetweenTwoEndpointsOfOneNode(RegistrationMode mode) throws Exception {
        try (KernelAgent kernel = KernelAgent.start(new KernelContext().name("solo").physicalMemoryBytes(8 << 20).swapBytes(16 << 20));
                // The claim is that nothing is lost on the loopback, not how fast: SHADOW's acknowledgements wait
                // for parked parts, which a loaded machine places late.
                Nic nic = new Nic("solo", kernel, new NicContext().ackTimeoutNs(2_000_000_000L), NicTimers.threaded("solo"), null)) {
            Endpoint first = nic.openEndpoint("first");
            Endpoint second = nic.openEndpoint("second");
            CompletionQueue cq1 = nic.createCompletionQueue();
            CompletionQueue cq2 = nic.createCompletionQueue();
            QueuePair q1 = nic.createQueuePair(first, cq1);
            QueuePair q2 = nic.createQueuePair(second, cq2);
            q1.connect(q2.address());
            q2.connect(q1.address());
            int len = 100_000;
            byte[] data = new byte[len];
            new Random(mode.ordinal()).nextBytes(data);
            long src = first.space().allocate(len);
            first.space().store(src, data, 0, len);
            long dst = second.space().allocate(2L * len);
            MemoryRegion from = first.register(src, len, mode, Access.all());
            MemoryRegion to = second.register(dst, 2L * len, mode, Access.all());

            q1.post(WorkRequest.write(1, from.lkey(), src, len, dst, to.rkey()));
            assertSuccess(cq1.take(10, TimeUnit.SECONDS), q1, q2);
            byte[] landed = new byte[len];
            second.space().load(dst, landed, 0, len);
            assertThat(landed).isEqualTo(data);

            q2.postReceive(new ReceiveRequest(7, to.lkey(), dst + len, len));
            q1.post(WorkRequest.send(2, from.lkey(), src, len));
            assertSuccess(cq1.take(10, TimeUnit.SECONDS), q1, q2);
            Completion received = cq2.take(10, TimeUnit.SECONDS);
            assertSuccess(received, q1, q2);
            assertThat(received.bytes()).isEqualTo(len);
            second.space().load(dst + len, landed, 0, len);
            assertThat(landed).isEqualTo(data);
            assertThat(nic.counters().get(NicCounter.ACK_TIMEOUTS)).as("nothing was lost on the way (no acknowledgement timed out)").isZero();
        }
    }

    private static void assertSuccess(Completion c, QueuePair q1, QueuePair q2) {
        assertThat(c).as("a completion\n" + q1.describe() + "\n" + q2.describe()).isNotNull();
        assertThat(c.status()).as(c.error()).isEqualTo(CompletionStatus.SUCCESS);
    }
}
