package io.pagewire.systemtests;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.testkit.ClusterSpec;
import org.junit.jupiter.api.Test;

/** The testkit's cluster spec: settings are checked against the node's own list, and a test's own settings go on a copy. */
class ClusterSpecTest {
    @Test
    void withAddsCheckedSettingsToACopyAndLeavesTheOriginalAlone() {
        ClusterSpec base = ClusterSpec.nodes(2).set("pagewire.nic.ackTimeoutNs", "50ms");
        ClusterSpec test = base.with("pagewire.nic.tlbEntries=64", " pagewire.nic.tlbWays = 4 ");
        assertThat(test.settings()).containsEntry("pagewire.nic.ackTimeoutNs", "50ms").containsEntry("pagewire.nic.tlbEntries", "64")
                .containsEntry("pagewire.nic.tlbWays", "4");
        assertThat(base.settings()).doesNotContainKey("pagewire.nic.tlbEntries");
        assertThat(test.size()).isEqualTo(2);
    }

    @Test
    void aMisspelledOrMalformedSettingIsRefusedWithTheReason() {
        ClusterSpec base = ClusterSpec.nodes(2);
        assertThatThrownBy(() -> base.with("pagewire.nic.tlbEntrys=64")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("no node setting is called 'pagewire.nic.tlbEntrys'");
        assertThatThrownBy(() -> base.with("pagewire.nic.tlbEntries")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("name=value");
        assertThatThrownBy(() -> base.with("pagewire.node.id=x")).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("given to each node by the test cluster");
    }
}
