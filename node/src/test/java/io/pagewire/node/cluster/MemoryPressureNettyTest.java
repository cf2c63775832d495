package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link MemoryPressureSuite} over real HTTP/2 on loopback. */
class MemoryPressureNettyTest extends MemoryPressureSuite {
    @Override
    protected Transport transport() {
        return Transport.NETTY;
    }
}
