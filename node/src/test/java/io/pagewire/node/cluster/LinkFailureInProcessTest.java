package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link LinkFailureSuite} over gRPC's in-process transport. */
class LinkFailureInProcessTest extends LinkFailureSuite {
    @Override
    protected Transport transport() {
        return Transport.IN_PROCESS;
    }
}
