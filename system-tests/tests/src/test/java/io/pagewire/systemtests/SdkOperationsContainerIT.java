package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@link SdkOperationsSuite} on two node containers, each with its own network address; the
 * application is on the Docker host, so the SDK finds no rings it can map and uses the gRPC stream.
 */
class SdkOperationsContainerIT extends SdkOperationsSuite {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(spec().backend(ClusterBackend.CONTAINERS));
}
