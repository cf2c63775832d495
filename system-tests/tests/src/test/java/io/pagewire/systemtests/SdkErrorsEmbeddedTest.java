package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link SdkErrorsSuite} on nodes in this JVM; the applications use the shared-memory rings. */
class SdkErrorsEmbeddedTest extends SdkErrorsSuite {
    @RegisterExtension
    final PagewireClusterExtension pagewire = new PagewireClusterExtension(spec().backend(ClusterBackend.EMBEDDED));
}
