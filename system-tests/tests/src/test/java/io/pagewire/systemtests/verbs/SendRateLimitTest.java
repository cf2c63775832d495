package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.nic.NicCounter;
import org.junit.jupiter.api.Test;

/**
 * Rate limits as applications see them: a queue pair paced by its application (SetQueuePairRateLimit,
 * ibv_modify_qp_rate_limit's counterpart) and a session held to its node's allowance
 * (pagewire.quota.sendBytesPerSecondPerSession), over the SDK. Timing is asserted from below only.
 */
class SendRateLimitTest extends SdkFixture {
    private static final int SIZE = 1 << 20;
    private static final long RATE = 4L << 20;
    private static final long BURST = 256 << 10;

    /** A queue pair from an endpoint on node 1 to one on node 2, with a region of SIZE on each side. */
    private record Pair(QueuePair qp, MemoryRegion from, long src, long dst, long rkey) {
        long writeAndTimeNanos() {
            long start = System.nanoTime();
            qp.await(qp.write(from, src, SIZE, dst, rkey));
            return System.nanoTime() - start;
        }
    }

    private Pair pair(String name) {
        Pagewire a = connect(cluster.node(1));
        Pagewire b = connect(cluster.node(2));
        Endpoint sender = a.openEndpoint(name);
        Endpoint receiver = b.openEndpoint(name + "-peer");
        long src = sender.allocate(SIZE);
        long dst = receiver.allocate(SIZE);
        MemoryRegion from = sender.register(src, SIZE, RegistrationMode.PINNED, Access.all());
        MemoryRegion to = receiver.register(dst, SIZE, RegistrationMode.PINNED, Access.all());
        return new Pair(sender.connect(receiver), from, src, dst, to.rkey());
    }

    @Test
    void anApplicationPacesItsQueuePairAndRemovesTheLimitAgain() {
        start(2, c -> { });
        Pair pair = pair("paced");
        pair.qp().rateLimit(RATE, BURST);
        long paced = pair.writeAndTimeNanos();
        // 1 MiB less the burst at 4 MiB/s.
        assertThat(paced).as("1 MiB at 4 MiB/s").isGreaterThanOrEqualTo((long) ((SIZE - BURST) / (double) RATE * 1e9));
        long waits = cluster.node(1).nic().counters().get(NicCounter.RATE_LIMIT_WAITS);
        assertThat(waits).isPositive();
        pair.qp().rateLimit(0, 0);
        pair.writeAndTimeNanos();
        assertThat(cluster.node(1).nic().counters().get(NicCounter.RATE_LIMIT_WAITS)).as("no wait without the limit").isEqualTo(waits);
    }

    @Test
    void aBadRateLimitIsAnInvalidRequestAndAClosedPairIsNotFound() {
        start(2, c -> { });
        Pair pair = pair("bad");
        assertThatThrownBy(() -> pair.qp().rateLimit(-5, 0)).isInstanceOf(PagewireException.InvalidRequestException.class)
                .hasMessageContaining("a rate limit is 0 (none) or a positive number of bytes per second");
        assertThatThrownBy(() -> pair.qp().rateLimit(RATE, 4L << 30)).isInstanceOf(PagewireException.InvalidRequestException.class)
                .hasMessageContaining("to 1073741824 bytes");
        pair.writeAndTimeNanos(); // the pair still works
        pair.qp().close();
        assertThatThrownBy(() -> pair.qp().rateLimit(RATE, 0)).isInstanceOf(PagewireException.NotFoundException.class)
                .hasMessageContaining("does not exist");
    }

    @Test
    void aNodesAllowanceHoldsEverySessionAndAPairsLimitCannotRaiseIt() {
        start(2, c -> c.nic().sendBytesPerSecondPerSession(RATE).sendBurstBytesPerSession(BURST));
        Pair pair = pair("held");
        pair.qp().rateLimit(1L << 40, 0); // asking for a terabyte per second buys nothing beyond the session's allowance
        long held = pair.writeAndTimeNanos();
        assertThat(held).as("1 MiB within a 4 MiB/s allowance").isGreaterThanOrEqualTo((long) ((SIZE - BURST) / (double) RATE * 1e9));
    }
}
