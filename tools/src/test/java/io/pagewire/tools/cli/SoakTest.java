package io.pagewire.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The CI-sized chaos soak: three nodes, two minutes, 1 % loss, duplication and reordering, link cuts,
 * node restarts and memory pressure, every mode and WRITE / WRITE_WITH_NOTIFY / SEND; zero invariant violations.
 * {@code -Dpagewire.soak.seconds=N} and {@code -Dpagewire.soak.seed=S} size and replay it.
 */
@Timeout(value = 10, unit = TimeUnit.MINUTES)
class SoakTest {
    @Test
    void twoMinutesOfChaosBreakNoInvariant() throws Exception {
        long seconds = Long.getLong("pagewire.soak.seconds", 120);
        long seed = Long.getLong("pagewire.soak.seed", System.nanoTime());
        Soak.Settings settings = new Soak.Settings(3, TimeUnit.SECONDS.toNanos(seconds), seed, 0.01, 0.01, 0.01, 0, true, true, 10_000_000);
        StringWriter log = new StringWriter();
        Soak.Result result = new Soak(settings, new PrintWriter(log, true)).run();
        String summary = result.summary(settings);
        System.out.println(log + summary);
        assertThat(result.violations()).as(summary).isEmpty();
        assertThat(result.operations()).as("the soak moved data: " + summary).isGreaterThan(1000);
        assertThat(result.faultsInjected()).as("faults were injected: " + summary).isPositive();
        assertThat(result.linkCuts()).as("links were cut: " + summary).isPositive();
        assertThat(result.restarts()).as("nodes were restarted: " + summary).isPositive();
        assertThat(result.majorFaults()).as("memory was under pressure (pages came back from swap): " + summary).isPositive();
    }

    @Test
    void theCheckerTellsAMessageFromAnotherStreamsACorruptedOneOrNone() {
        // The checker itself: a buffer holding another message, or none, is told apart from the expected one.
        byte[] message = Soak.pattern(3, 41);
        assertThat(Soak.messageIn(3, message)).isEqualTo(41);
        assertThat(Soak.messageIn(4, message)).as("another stream's message").isEqualTo(-1);
        message[100] ^= 1;
        assertThat(Soak.messageIn(3, message)).as("a corrupted byte").isEqualTo(-1);
        assertThat(Soak.messageIn(3, new byte[Soak.MESSAGE])).as("nothing written").isEqualTo(-1);
    }
}
