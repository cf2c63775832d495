package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class NicContextTest {
    static Stream<Arguments> badValues() {
        return Stream.of(
                Arguments.of("pagewire.nic.tlbEntries", (Consumer<NicContext>) c -> c.tlbEntries(0)),
                Arguments.of("pagewire.nic.tlbWays", (Consumer<NicContext>) c -> c.tlbEntries(64).tlbWays(5)),
                Arguments.of("pagewire.nic.mtuBytes", (Consumer<NicContext>) c -> c.mtuBytes(10)),
                Arguments.of("pagewire.nic.sendWindowPackets", (Consumer<NicContext>) c -> c.sendWindowPackets(0)),
                Arguments.of("pagewire.nic.readRequestPackets", (Consumer<NicContext>) c -> c.sendWindowPackets(8).readRequestPackets(9)),
                Arguments.of("pagewire.nic.ackTimeoutNs", (Consumer<NicContext>) c -> c.ackTimeoutNs(10)),
                Arguments.of("pagewire.nic.rnrRetryCount", (Consumer<NicContext>) c -> c.rnrRetryCount(8)),
                Arguments.of("pagewire.nic.rnrDelayNs", (Consumer<NicContext>) c -> c.rnrDelayNs(0)),
                Arguments.of("pagewire.nic.creditsPerQp", (Consumer<NicContext>) c -> c.creditsPerQp(0)),
                Arguments.of("pagewire.nic.cqCapacity", (Consumer<NicContext>) c -> c.cqCapacity(1)),
                Arguments.of("pagewire.quota.sendBytesPerSecondPerSession", (Consumer<NicContext>) c -> c.sendBytesPerSecondPerSession(-1)),
                Arguments.of("pagewire.quota.sendBurstBytesPerSession", (Consumer<NicContext>) c -> c.sendBurstBytesPerSession(0)));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("badValues")
    void aBadValueIsRejectedNamingItsKnob(String knob, Consumer<NicContext> change) {
        NicContext context = new NicContext();
        change.accept(context);
        assertThatThrownBy(context::conclude).isInstanceOf(IllegalArgumentException.class).hasMessageStartingWith(knob + " must be");
    }

    @Test
    void modesAndPoliciesParseWithTheChoicesNamed() {
        assertThat(RegistrationMode.parse("pin-on-miss")).isEqualTo(RegistrationMode.PIN_ON_MISS);
        assertThatThrownBy(() -> RegistrationMode.parse("lazy")).hasMessageContaining("[PINNED, PIN_ON_MISS, SHADOW, ON_DEMAND]");
        assertThatThrownBy(() -> TlbReplacement.parse("pagewire.nic.tlbReplacement", "clock"))
                .hasMessage("pagewire.nic.tlbReplacement must be one of [LRU, FIFO, RANDOM], was 'clock'");
    }

    @Test
    void memoryPressureTakesEveryTouchAtMostAndSaysSoBeyondIt() {
        assertThat(new NicContext().reclaimAfterAccess(1.0).conclude().reclaimAfterAccess()).as("after every touch").isEqualTo(1.0);
        assertThatThrownBy(() -> new NicContext().reclaimAfterAccess(1.5).conclude())
                .hasMessageContaining("pagewire.nic.reclaimAfterAccess must be a probability from 0 to 1, was 1.5");
    }

    @Test
    void creditsPerQpMustCoverOnePacket() {
        try (KernelAgent kernel = KernelAgent.start(new KernelContext().physicalMemoryBytes(1 << 20).swapBytes(0))) {
            assertThatThrownBy(() -> new Nic("n", kernel, new NicContext().creditsPerQp(1), NicTimers.threaded("n"), null))
                    .hasMessage("pagewire.nic.creditsPerQp must be at least 2 (the page-sized parts one MTU-sized packet can touch), was 1");
        }
    }

    @Test
    void queuePairsBeyondTheSystemBufferAreRefusedWithTheFix() {
        // Four slots: two pairs' first grants (two credits each, what one MTU-sized packet may need).
        KernelContext kernelContext = new KernelContext().physicalMemoryBytes(1 << 20).swapBytes(0).systemBufferBytes(4 * 4096);
        try (KernelAgent kernel = KernelAgent.start(kernelContext);
                Nic nic = new Nic("n", kernel, new NicContext().creditsPerQp(32), NicTimers.threaded("n"), null)) {
            Endpoint endpoint = nic.openEndpoint("e");
            CompletionQueue cq = nic.createCompletionQueue();
            nic.createQueuePair(endpoint, cq);
            QueuePair second = nic.createQueuePair(endpoint, cq);
            assertThatThrownBy(() -> nic.createQueuePair(endpoint, cq))
                    .isInstanceOf(QuotaExceededException.class)
                    .hasMessageContaining("4 of 4 system-buffer slots are granted to 2 queue pairs")
                    .hasMessageContaining("raise pagewire.kernel.systemBufferBytes");
            second.close();
            assertThat(nic.creditsGranted()).isEqualTo(2);
            nic.createQueuePair(endpoint, cq);
        }
    }

    @Test
    void aDefaultNodeIsNotLimitedToAHandfulOfQueuePairsByCreditsTheyNeverUse() {
        // The default system buffer (1 MiB: 256 slots) and share (32 credits) used to admit 8 pairs.
        try (KernelAgent kernel = KernelAgent.start(new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(0));
                Nic nic = new Nic("n", kernel, new NicContext(), NicTimers.threaded("n"), null)) {
            Endpoint endpoint = nic.openEndpoint("e");
            CompletionQueue cq = nic.createCompletionQueue();
            for (int i = 0; i < 100; i++) {
                nic.createQueuePair(endpoint, cq);
            }
            assertThat(nic.creditsGranted()).isEqualTo(200);
        }
    }
}
