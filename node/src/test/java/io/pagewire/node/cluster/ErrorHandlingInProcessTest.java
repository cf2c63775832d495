package io.pagewire.node.cluster;

import io.pagewire.node.Transport;

/** {@link ErrorHandlingSuite} over gRPC's in-process transport. */
class ErrorHandlingInProcessTest extends ErrorHandlingSuite {
    @Override
    protected Transport transport() {
        return Transport.IN_PROCESS;
    }
}
