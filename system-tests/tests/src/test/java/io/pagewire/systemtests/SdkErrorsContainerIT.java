package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link SdkErrorsSuite} on two node containers; the application on the Docker host uses the gRPC stream. */
class SdkErrorsContainerIT extends SdkErrorsSuite {
    @RegisterExtension
    final PagewireClusterExtension pagewire = new PagewireClusterExtension(spec().backend(ClusterBackend.CONTAINERS));
}
