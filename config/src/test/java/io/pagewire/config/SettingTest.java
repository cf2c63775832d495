package io.pagewire.config;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class SettingTest {
    @Test
    void sizesAndTimesTakeUnits() {
        assertThat(SettingType.bytes("k", "4096")).isEqualTo(4096);
        assertThat(SettingType.bytes("k", "64KiB")).isEqualTo(65536);
        assertThat(SettingType.bytes("k", "256 MiB")).isEqualTo(256L << 20);
        assertThat(SettingType.bytes("k", "2g")).isEqualTo(2L << 30);
        assertThat(SettingType.nanos("k", "200ms")).isEqualTo(200_000_000L);
        assertThat(SettingType.nanos("k", "50us")).isEqualTo(50_000L);
        assertThat(SettingType.nanos("k", "7")).isEqualTo(7);
        assertThat(SettingType.nanos("k", "30m")).isEqualTo(1_800_000_000_000L);
        assertThat(SettingType.nanos("k", "1h")).isEqualTo(3_600_000_000_000L);
        assertThatThrownBy(() -> SettingType.bytes("pagewire.kernel.swapBytes", "lots"))
                .hasMessage("pagewire.kernel.swapBytes must be a size such as 4096, 64KiB or 256MiB, was 'lots'");
        assertThatThrownBy(() -> SettingType.bytes("pagewire.kernel.swapBytes", "99999999999GiB")).hasMessageContaining("too large");
    }

    @Test
    void defaultsAreWrittenAsAPersonWouldAndReadBack() {
        assertThat(SettingType.BYTES.format(256L << 20)).isEqualTo("256MiB");
        assertThat(SettingType.BYTES.format(1000L)).isEqualTo("1000");
        assertThat(SettingType.DURATION.format(200_000_000L)).isEqualTo("200ms");
        assertThat(SettingType.DURATION.format(1_500L)).isEqualTo("1500ns");
        Setting<Long> timeout = Setting.nanos("pagewire.test.timeoutNs", 10_000_000_000L, "a timeout");
        assertThat(timeout.formattedDefault()).isEqualTo("10s");
        assertThat(timeout.parse(timeout.formattedDefault())).isEqualTo(10_000_000_000L);
    }

    @Test
    void aValueOutsideItsRuleIsRefusedNamingTheSettingAndTheRule() {
        Setting<Integer> entries = Setting.count("pagewire.test.entries", 8, "entries").between(1, 64);
        assertThat(entries.check(64)).isEqualTo(64);
        assertThatThrownBy(() -> entries.check(65)).hasMessage("pagewire.test.entries must be from 1 to 64, was 65");
        assertThatThrownBy(() -> entries.parse("eight")).hasMessage("pagewire.test.entries must be a whole number, was 'eight'");
    }

    @Test
    void namesBecomeEnvironmentVariables() {
        assertThat(Setting.environmentName("pagewire.kernel.physicalMemoryBytes")).isEqualTo("PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES");
        assertThat(Setting.environmentName("pagewire.rings.sleepLimitNs")).isEqualTo("PAGEWIRE_RINGS_SLEEP_LIMIT_NS");
        assertThatThrownBy(() -> Setting.count("kernel.pages", 1, "x")).hasMessageContaining("pagewire.area.knobName");
    }

    @Test
    void choicesListsAndPeersParse() {
        Setting<Thread.State> state = Setting.choice("pagewire.test.state", Thread.State.class, Thread.State.NEW, "a state");
        assertThat(state.parse(" timed-waiting ")).isEqualTo(Thread.State.TIMED_WAITING);
        assertThatThrownBy(() -> state.parse("asleep")).hasMessageStartingWith("pagewire.test.state must be one of new, runnable");
        assertThat(Setting.ids("pagewire.test.ids", "ids").parse(" node-2, ,node-3")).containsExactly("node-2", "node-3");
        assertThat(Setting.peers("pagewire.test.peers", "peers").parse("a=h1:1,b=h2:2"))
                .containsExactly(Map.entry("a", "h1:1"), Map.entry("b", "h2:2"));
        assertThatThrownBy(() -> Setting.peers("pagewire.test.peers", "peers").parse("a"))
                .hasMessageStartingWith("pagewire.test.peers must be id=host:port");
    }

    /** Declared as a component declares its settings. */
    static final class Declared {
        public static final Setting<Integer> FIRST = Setting.count("pagewire.test.first", 1, "first");
        public static final Setting<Long> SECOND = Setting.bytes("pagewire.test.second", 2, "second");
    }

    @Test
    void valuesStartAtTheirDefaultsAndAreCheckedTogether() {
        assertThat(Setting.declaredIn(Declared.class)).containsExactly(Declared.FIRST, Declared.SECOND);
        SettingValues values = new SettingValues(List.of(Declared.FIRST));
        assertThat(values.get(Declared.FIRST)).isEqualTo(1);
        values.setText(Declared.FIRST, "5");
        assertThat(values.get(Declared.FIRST)).isEqualTo(5);
        assertThatThrownBy(() -> values.get(Declared.SECOND)).hasMessageContaining("not a setting of this component");
    }
}
