package io.pagewire.node.verbs;

import io.pagewire.client.ConnectOptions;

/** {@link SdkErrorsTest} for a remote application: everything on the gRPC session stream, no shared-memory rings. */
class SdkErrorsOverStreamTest extends SdkErrorsTest {
    @Override
    protected ConnectOptions connectOptions() {
        return ConnectOptions.defaults().withSharedMemory(false);
    }
}
