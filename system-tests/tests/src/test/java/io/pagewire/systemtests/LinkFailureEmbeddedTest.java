package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link LinkFailureSuite} on nodes in this JVM; a cut tears the fabric's lanes down. */
class LinkFailureEmbeddedTest extends LinkFailureSuite {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(spec().backend(ClusterBackend.EMBEDDED));
}
