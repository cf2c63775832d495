package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link LossyFabricSuite} over gRPC's in-process transport. */
class LossyFabricInProcessTest extends LossyFabricSuite {
    @Override
    protected Transport transport() {
        return Transport.IN_PROCESS;
    }
}
