package io.pagewire.systemtests;

import io.pagewire.client.ConnectOptions;
import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link SdkErrorsSuite} on nodes in this JVM for a remote application: everything on the gRPC session stream, no rings. */
class SdkErrorsEmbeddedOverStreamTest extends SdkErrorsSuite {
    @RegisterExtension
    final PagewireClusterExtension pagewire = new PagewireClusterExtension(spec().backend(ClusterBackend.EMBEDDED));

    @Override
    protected ConnectOptions connectOptions() {
        return ConnectOptions.defaults().withSharedMemory(false);
    }
}
