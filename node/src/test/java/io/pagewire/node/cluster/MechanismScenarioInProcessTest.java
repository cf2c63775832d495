package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link MechanismScenarioSuite} over gRPC's in-process transport. */
class MechanismScenarioInProcessTest extends MechanismScenarioSuite {
    @Override
    protected Transport transport() {
        return Transport.IN_PROCESS;
    }
}
