package io.pagewire.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class QpAddressTest {
    @Test
    void theTextFormRoundTrips() {
        QpAddress address = new QpAddress("node-2", 7, 32, 4096);
        assertThat(address.toString()).isEqualTo("node-2/7/32/4096");
        assertThat(QpAddress.parse(" node-2/7/32/4096 ")).isEqualTo(address);
    }

    @Test
    void aMalformedAddressSaysWhatTheFormIs() {
        assertThatThrownBy(() -> QpAddress.parse("node-2/7")).isInstanceOf(IllegalArgumentException.class)
                .hasMessage("a queue pair address is node/qpn/credits/pageSize (e.g. node-2/7/32/4096), was 'node-2/7'");
        assertThatThrownBy(() -> QpAddress.parse("node-2/x/32/4096")).hasMessageContaining("with numbers after the node");
    }
}
