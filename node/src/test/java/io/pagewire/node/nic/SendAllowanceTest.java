package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** The send allowance's arithmetic on a clock the test moves: a burst goes at once, then the rate holds. */
class SendAllowanceTest {
    private static final long MIB = 1 << 20;

    @Test
    void aBurstGoesAtOnceAndThenPacketsWaitForTheRate() {
        long now = 1_000_000_000L;
        SendAllowance allowance = new SendAllowance(4 * MIB, 64 << 10, now); // 4 MiB/s, 64 KiB burst
        int packets = 0;
        while (allowance.delayNs(now) == 0) {
            allowance.spend(4096, now);
            packets++;
        }
        // 64 KiB of allowance at 4,160 bytes per 4 KiB packet (64 of headers), and the packet that crossed it.
        assertThat(packets).isEqualTo(16);
        long delay = allowance.delayNs(now);
        // It wakes when half the burst is free again: the overshoot plus 32 KiB at 4 MiB/s, about 8 ms.
        assertThat(delay).isBetween(7_800_000L, 9_000_000L);
        now += delay;
        int afterWake = 0;
        while (allowance.delayNs(now) == 0) {
            allowance.spend(4096, now);
            afterWake++;
        }
        assertThat(afterWake).as("half a burst per wake").isBetween(7, 9);
    }

    @Test
    void overALongRunTheBytesSentMatchTheRate() {
        long now = 0;
        long rate = 10 * MIB;
        SendAllowance allowance = new SendAllowance(rate, 256 << 10, now);
        long sent = 0;
        long end = 2_000_000_000L; // two seconds of a sender that always has data
        while (now < end) {
            long delay = allowance.delayNs(now);
            if (delay > 0) {
                now += delay;
                continue;
            }
            allowance.spend(4096, now);
            sent += 4096 + SendAllowance.PACKET_HEADER_BYTES;
        }
        // Two seconds at the rate, plus the first burst.
        assertThat((double) sent).isCloseTo(2.0 * rate + (256 << 10), org.assertj.core.data.Percentage.withPercentage(1));
    }

    @Test
    void anIdleSessionSavesNoMoreThanOneBurst() {
        long now = 0;
        SendAllowance allowance = new SendAllowance(MIB, 16 << 10, now);
        now += 10_000_000_000L; // ten idle seconds earn no ten megabytes
        int packets = 0;
        while (allowance.delayNs(now) == 0) {
            allowance.spend(1024, now);
            packets++;
        }
        assertThat(packets).isEqualTo(16); // 16 KiB at 1,088 bytes per packet, and the one that crossed it
    }

    @Test
    void aRateOrBurstThatIsNotPositiveIsRefused() {
        assertThatThrownBy(() -> new SendAllowance(0, 1024, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new SendAllowance(1024, 0, 0)).isInstanceOf(IllegalArgumentException.class);
    }
}
