package io.pagewire.node.verbs;

import io.pagewire.client.ConnectOptions;

/** {@link SdkOperationsTest} for a remote application: everything on the gRPC session stream, no shared-memory rings. */
class SdkOperationsOverStreamTest extends SdkOperationsTest {
    @Override
    protected ConnectOptions connectOptions() {
        return ConnectOptions.defaults().withSharedMemory(false);
    }
}
