package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link DataMovementSuite} over gRPC's in-process transport. */
class DataMovementInProcessTest extends DataMovementSuite {
    @Override
    protected Transport transport() {
        return Transport.IN_PROCESS;
    }
}
