package io.pagewire.node.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The pacing rule on its own, on a clock the test moves: a burst passes, the rate holds after it, each
 * caller has its own budget.
 */
class ControlPacerTest {
    /** The pacer's time: it moves only when a test moves it. */
    private final AtomicLong now = new AtomicLong(1_000_000_000L);
    @Test
    void aBurstPassesThenEachOperationWaitsItsIntervalAndTooLongAWaitIsRefused() {
        // 10 per second (100 ms apart), a burst of 5, at most 1 s of waiting.
        ControlPacer pacer = new ControlPacer(10, 5, 1_000_000_000L, now::get);
        for (int i = 0; i < 5; i++) {
            assertThat(pacer.admit("flooder")).as("operation " + i + " of the burst").isZero();
        }
        long previous = 0;
        int admitted = 0;
        long wait;
        while ((wait = pacer.admit("flooder")) != ControlPacer.REFUSE) {
            assertThat(wait).as("each later operation waits one interval more").isEqualTo(previous + 100_000_000L);
            previous = wait;
            admitted++;
        }
        assertThat(previous).isEqualTo(1_000_000_000L);
        assertThat(admitted).as("waits up to 1 s at 100 ms apart").isEqualTo(10);
        assertThat(pacer.delayed()).isEqualTo(admitted);
        assertThat(pacer.refused()).isEqualTo(1);
        assertThat(pacer.admit("flooder")).as("still over: refused again, nothing reserved by a refusal").isEqualTo(ControlPacer.REFUSE);
        assertThat(pacer.admit("someone else")).as("another caller's budget is its own").isZero();
    }

    @Test
    void aRateOfZeroPacesNothing() {
        ControlPacer pacer = new ControlPacer(0, 1, 0);
        for (int i = 0; i < 100_000; i++) {
            assertThat(pacer.admit("anyone")).isZero();
        }
        assertThat(pacer.enabled()).isFalse();
    }

    @Test
    void callersWhoseBudgetIsFullAgainAreForgottenSoManyOneOffCallersDoNotGrowIt() {
        // 1,000 per second with a burst of 2: a caller is idle again 1 ms after its operation.
        ControlPacer pacer = new ControlPacer(1000, 2, 1_000_000_000L, now::get);
        for (int i = 0; i < ControlPacer.FORGET_ABOVE; i++) {
            pacer.admit("host 10.0.0." + i);
        }
        assertThat(pacer.callersRemembered()).isEqualTo(ControlPacer.FORGET_ABOVE);
        now.addAndGet(20_000_000L); // 20 ms on: every one of them is idle again
        assertThat(pacer.admit("host 10.0.1.1")).isZero();
        assertThat(pacer.callersRemembered()).as("the idle callers were forgotten").isEqualTo(1);
        for (int i = 0; i < 3; i++) {
            pacer.admit("busy");
        }
        assertThat(pacer.admit("busy")).as("a caller over its rate is remembered and still waits").isPositive();
    }
}
