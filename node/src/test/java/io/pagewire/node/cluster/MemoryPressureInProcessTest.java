package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link MemoryPressureSuite} over gRPC's in-process transport. */
class MemoryPressureInProcessTest extends MemoryPressureSuite {
    @Override
    protected Transport transport() {
        return Transport.IN_PROCESS;
    }
}
