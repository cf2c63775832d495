package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link LossyFabricSuite} over real HTTP/2 on loopback. */
class LossyFabricNettyTest extends LossyFabricSuite {
    @Override
    protected Transport transport() {
        return Transport.NETTY;
    }
}
