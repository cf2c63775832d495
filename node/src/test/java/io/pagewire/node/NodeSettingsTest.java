package io.pagewire.node;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.config.Setting;
import io.pagewire.kernel.KernelConfiguration;
import io.pagewire.kernel.StorageModel;
import io.pagewire.node.fabric.FabricConfiguration;
import io.pagewire.node.nic.NicConfiguration;
import io.pagewire.node.security.SecurityConfiguration;
import io.pagewire.node.verbs.VerbsConfiguration;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class NodeSettingsTest {
    @Test
    void aPeerListThatNamesTheNodeItselfServesEveryReplica() {
        NodeContext context = new NodeContext().nodeId("pagewire-1");
        context.security().plaintext();
        NodeSettings.apply(context, Map.of(NodeConfiguration.PEERS.name(),
                "pagewire-0=pagewire-0.pagewire:7100,pagewire-1=pagewire-1.pagewire:7100,pagewire-2=pagewire-2.pagewire:7100"), "test");
        assertThat(context.conclude().peers()).containsOnlyKeys("pagewire-0", "pagewire-2");
    }

    @Test
    void aSwapDevicePresetAndItsSingleFiguresComeFromAFileInAnyOrder(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("node.properties");
        // A properties file is applied in name order: swapBytesPerSecond comes before swapDevice.
        Files.writeString(file, "pagewire.kernel.swapBytesPerSecond=100MiB\npagewire.kernel.swapDevice=hdd\n"
                + "pagewire.kernel.swapReadLatencyNs=2ms\npagewire.kernel.faultOverheadNs=3us\n"
                + "pagewire.kernel.pinCostNs=2us\npagewire.kernel.faultHandlers=8\n");
        NodeContext context = new NodeContext();
        NodeSettings.apply(context, NodeSettings.fromFile(file), "file");
        assertThat(context.kernel().swapDevice()).isEqualTo(StorageModel.HDD.withReadLatencyNs(2_000_000).withBytesPerSecond(100L << 20));
        assertThat(context.kernel().faultOverheadNs()).isEqualTo(3_000);
        assertThat(context.kernel().pinCostNs()).isEqualTo(2_000);
        assertThat(context.kernel().faultHandlers()).isEqualTo(8);
        assertThatThrownBy(() -> NodeSettings.apply(new NodeContext(), Map.of("pagewire.kernel.swapDevice", "tape"), "test"))
                .hasMessage("pagewire.kernel.swapDevice must be one of nvme, sata-ssd, hdd, ram, was tape");
    }

    @Test
    void environmentNamesFollowTheProperties() {
        assertThat(NodeSettings.environmentName("pagewire.kernel.physicalMemoryBytes")).isEqualTo("PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES");
        assertThat(NodeSettings.environmentName("pagewire.node.id")).isEqualTo("PAGEWIRE_NODE_ID");
        Map<String, String> settings = NodeSettings.fromEnvironment(Map.of("PAGEWIRE_NIC_TLB_ENTRIES", "64", "HOME", "/root",
                "PAGEWIRE_JAVA_OPTS", "-Xmx1g"));
        assertThat(settings).containsExactly(Map.entry("pagewire.nic.tlbEntries", "64"));
        assertThatThrownBy(() -> NodeSettings.fromEnvironment(Map.of("PAGEWIRE_NIC_TLB_ENTRYS", "64")))
                .hasMessageStartingWith("unknown setting in the environment: PAGEWIRE_NIC_TLB_ENTRYS");
    }

    @Test
    void settingsLandInTheContextAndLaterSourcesWin(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("node.properties");
        Files.writeString(file, "pagewire.node.id=from-file\npagewire.kernel.physicalMemoryBytes=64MiB\npagewire.nic.tlbEntries=32\n");
        NodeContext context = new NodeContext();
        NodeSettings.apply(context, NodeSettings.fromFile(file), "file");
        NodeSettings.apply(context, Map.of("pagewire.nic.tlbEntries", "128", "pagewire.node.peers", "node-2=h2:7100,node-3=h3:7100",
                "pagewire.security.transport", "plaintext"), "env");
        context.conclude();
        assertThat(context.nodeId()).isEqualTo("from-file");
        assertThat(context.kernel().physicalMemoryBytes()).isEqualTo(64L << 20);
        assertThat(context.nic().tlbEntries()).isEqualTo(128);
        assertThat(context.peers()).containsExactly(Map.entry("node-2", "h2:7100"), Map.entry("node-3", "h3:7100"));
        assertThatThrownBy(() -> NodeSettings.apply(new NodeContext(), Map.of("pagewire.kernel.nope", "1"), "--set"))
                .hasMessageStartingWith("unknown setting pagewire.kernel.nope (from --set); known settings:");
        assertThatThrownBy(() -> NodeConfiguration.PEERS.parse("node-2"))
                .hasMessageStartingWith("pagewire.node.peers must be id=host:port");
    }

    @Test
    void everySettingOfEveryPartIsKnownByNameOnceAndItsDefaultPassesItsOwnCheck() {
        for (Class<?> configuration : new Class<?>[] {NodeConfiguration.class, KernelConfiguration.class,
            NicConfiguration.class, FabricConfiguration.class,
            SecurityConfiguration.class, VerbsConfiguration.class}) {
            for (Setting<?> setting : Setting.declaredIn(configuration)) {
                assertThat(NodeSettings.setting(setting.name())).as(configuration.getSimpleName() + " " + setting).isSameAs(setting);
                check(setting);
            }
        }
        assertThat(NodeSettings.names()).contains("pagewire.rings.sleepLimitNs", "pagewire.quota.sessions", "pagewire.node.ringDirectory");
    }

    private static <T> void check(Setting<T> setting) {
        if (setting.defaultValue() != null) {
            setting.check(setting.defaultValue());
            assertThat(setting.parse(setting.formattedDefault())).as(setting + " reads back its written default").isEqualTo(setting.defaultValue());
        }
    }

    @Test
    void theEnvironmentReachesEverySettingEvenTheRingSleepLimit() {
        NodeContext context = new NodeContext();
        NodeSettings.apply(context, NodeSettings.fromEnvironment(Map.of("PAGEWIRE_RINGS_SLEEP_LIMIT_NS", "5ms",
                "PAGEWIRE_QUOTA_SESSIONS", "7")), "the environment");
        assertThat(context.verbs().ringSleepLimitNs()).isEqualTo(5_000_000L);
        assertThat(context.verbs().sessionsLimit()).isEqualTo(7);
    }

    @Test
    void aBadValueNamesItsSettingWhereverItCameFrom() {
        NodeContext context = new NodeContext();
        NodeSettings.apply(context, Map.of("pagewire.nic.tlbWays", "0"), "test");
        assertThatThrownBy(context::conclude).hasMessage("pagewire.nic.tlbWays must be at least 1, was 0");
        assertThatThrownBy(() -> NodeSettings.apply(new NodeContext(), Map.of("pagewire.nic.mtuBytes", "4 KiB please"), "test"))
                .hasMessageStartingWith("pagewire.nic.mtuBytes must be a size such as 4096");
    }
}
