package io.pagewire.systemtests;

import io.pagewire.client.ConnectOptions;
import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link VerbsConformanceSuite} for a remote application: everything on the gRPC session stream, no shared-memory rings. */
class VerbsConformanceEmbeddedOverStreamTest extends VerbsConformanceSuite {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(spec().backend(ClusterBackend.EMBEDDED));

    @Override
    protected ConnectOptions connectOptions() {
        return ConnectOptions.defaults().withSharedMemory(false);
    }
}
