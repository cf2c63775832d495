package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link MechanismScenarioSuite} over real HTTP/2 on loopback. */
class MechanismScenarioNettyTest extends MechanismScenarioSuite {
    @Override
    protected Transport transport() {
        return Transport.NETTY;
    }
}
