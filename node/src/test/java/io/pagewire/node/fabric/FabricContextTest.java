package io.pagewire.node.fabric;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class FabricContextTest {
    @Test
    void badValuesAreRejectedNamingTheirKnob() {
        assertThatThrownBy(() -> new FabricContext().conclude()).hasMessageStartingWith("pagewire.node.id must be");
        assertThatThrownBy(() -> new FabricContext().nodeId("a b").conclude()).hasMessageStartingWith("pagewire.node.id must be");
        assertThatThrownBy(() -> new FabricContext().nodeId("n").lossRate(1.5).conclude())
                .hasMessage("pagewire.fabric.lossRate must be a probability from 0 to below 1, was 1.5");
        assertThatThrownBy(() -> new FabricContext().nodeId("n").lanesPerPeer(0).conclude())
                .hasMessageStartingWith("pagewire.fabric.lanesPerPeer must be");
        assertThatThrownBy(() -> new FabricContext().nodeId("n").reconnectBackoffMinNs(5_000_000).reconnectBackoffMaxNs(1_000_000).conclude())
                .hasMessageStartingWith("pagewire.fabric.reconnectBackoffMaxNs must be");
    }

    @Test
    void cutLinksParseFromAList() {
        assertThat(FabricConfiguration.CUT_LINKS.parse(" node-2, ,node-3")).containsExactly("node-2", "node-3");
    }
}
