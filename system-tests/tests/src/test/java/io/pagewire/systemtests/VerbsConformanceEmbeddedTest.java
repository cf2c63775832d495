package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link VerbsConformanceSuite} on nodes in this JVM; the applications use the shared-memory rings, as co-located ones do. */
class VerbsConformanceEmbeddedTest extends VerbsConformanceSuite {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(spec().backend(ClusterBackend.EMBEDDED));
}
