package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link LinkFailureSuite} over real HTTP/2 on loopback. */
class LinkFailureNettyTest extends LinkFailureSuite {
    @Override
    protected Transport transport() {
        return Transport.NETTY;
    }
}
