package io.pagewire.kernel;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Random;
import java.util.function.Consumer;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class KernelContextTest {
    @Test
    void defaultsAreTheDesignsAndResolveTheNodePinLimit() {
        KernelContext context = new KernelContext().conclude();
        assertThat(context.pageSizeBytes()).isEqualTo(4096);
        assertThat(context.physicalMemoryBytes()).isEqualTo(256L << 20);
        assertThat(context.frameCount()).isEqualTo(65536);
        assertThat(context.nodePinLimitBytes()).isEqualTo(192L << 20);
        assertThat(context.pageReplacement()).isEqualTo(PageReplacement.CLOCK);
    }

    static Stream<Arguments> badValues() {
        return Stream.of(
                bad("pagewire.kernel.pageSizeBytes", c -> c.pageSizeBytes(3000)),
                bad("pagewire.kernel.pageSizeBytes", c -> c.pageSizeBytes(256)),
                bad("pagewire.kernel.pageSizeBytes", c -> c.pageSizeBytes(4 << 20)),
                bad("pagewire.kernel.physicalMemoryBytes", c -> c.physicalMemoryBytes(4096 * 16 + 1)),
                bad("pagewire.kernel.physicalMemoryBytes", c -> c.physicalMemoryBytes(4096 * 8)),
                bad("pagewire.kernel.swapBytes", c -> c.swapBytes(-4096)),
                bad("pagewire.kernel.swapBytes", c -> c.swapBytes(100)),
                bad("pagewire.kernel.memlockLimitBytes", c -> c.memlockLimitBytes(-1)),
                bad("pagewire.kernel.nodePinLimitBytes", c -> c.nodePinLimitBytes(1L << 40)),
                bad("pagewire.kernel.systemBufferBytes", c -> c.systemBufferBytes(100)),
                bad("pagewire.kernel.pageReplacement", c -> c.pageReplacement(null)),
                bad("pagewire.kernel.dmaDrainTimeoutNs", c -> c.dmaDrainTimeoutNs(0)));
    }

    private static Arguments bad(String knob, Consumer<KernelContext> change) {
        return Arguments.of(knob, change);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("badValues")
    void aBadValueIsRejectedNamingItsKnob(String knob, Consumer<KernelContext> change) {
        KernelContext context = new KernelContext();
        change.accept(context);
        assertThatThrownBy(context::conclude)
                .isInstanceOf(IllegalArgumentException.class)
                .hasMessageStartingWith(knob + " must be");
    }

    @Test
    void hugePagesOfUpTo2MiBAreAcceptedWithSystemBufferSlotsOf64KiB() {
        KernelContext context = new KernelContext().pageSizeBytes(2 << 20).physicalMemoryBytes(64L << 20).conclude();
        assertThat(context.frameCount()).isEqualTo(32);
        assertThat(SystemBuffer.slotBytes(2 << 20)).isEqualTo(64 << 10);
        assertThat(SystemBuffer.slotBytes(4096)).isEqualTo(4096);
        try (KernelAgent kernel = KernelAgent.start(new KernelContext().name("huge").pageSizeBytes(2 << 20).physicalMemoryBytes(64L << 20)
                .swapBytes(64L << 20).systemBufferBytes(1 << 20))) {
            assertThat(kernel.systemBuffer().slotCount()).as("a 1 MiB buffer of 64 KiB slots").isEqualTo(16);
            AddressSpace space = kernel.createAddressSpace();
            long at = space.allocate(6L << 20);
            byte[] data = new byte[3 << 20];
            new Random(1).nextBytes(data);
            space.store(at + 100, data, 0, data.length);
            byte[] back = new byte[data.length];
            space.load(at + 100, back, 0, back.length);
            assertThat(back).isEqualTo(data);
            assertThat(space.residentPages()).as("3 MiB from offset 100 touches two huge pages").isEqualTo(2);
        }
    }

    @Test
    void anUnknownReplacementPolicyNamesTheChoices() {
        assertThatThrownBy(() -> KernelConfiguration.PAGE_REPLACEMENT.parse("lru"))
                .hasMessage("pagewire.kernel.pageReplacement must be one of clock, fifo, was 'lru'");
        assertThat(KernelConfiguration.PAGE_REPLACEMENT.parse(" clock ")).isEqualTo(PageReplacement.CLOCK);
    }

    @Test
    void sizesAreFormattedForPeople() {
        assertThat(ByteSizes.format(64L << 20)).isEqualTo("64 MiB");
        assertThat(ByteSizes.format(12 * 1024)).isEqualTo("12 KiB");
        assertThat(ByteSizes.format(1536 * 1024)).isEqualTo("1536 KiB");
        assertThat(ByteSizes.format((1L << 30) + (1L << 20))).isEqualTo("1025 MiB");
        assertThat(ByteSizes.format(1536 * 1024 + 1)).isEqualTo("1.5 MiB");
        assertThat(ByteSizes.format(100)).isEqualTo("100 bytes");
        assertThat(ByteSizes.format(3L << 30)).isEqualTo("3 GiB");
    }
}
