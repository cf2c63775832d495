package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link ErrorHandlingSuite} over real HTTP/2 on loopback. */
class ErrorHandlingNettyTest extends ErrorHandlingSuite {
    @Override
    protected Transport transport() {
        return Transport.NETTY;
    }
}
