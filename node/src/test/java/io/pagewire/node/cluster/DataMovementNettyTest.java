package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link DataMovementSuite} over real HTTP/2 on loopback. */
class DataMovementNettyTest extends DataMovementSuite {
    @Override
    protected Transport transport() {
        return Transport.NETTY;
    }
}
