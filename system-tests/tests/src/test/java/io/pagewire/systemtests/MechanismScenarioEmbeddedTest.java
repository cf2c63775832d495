package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link MechanismScenarioSuite} on nodes in this JVM, a fresh pair per test. */
class MechanismScenarioEmbeddedTest extends MechanismScenarioSuite {
    @RegisterExtension
    final PagewireClusterExtension pagewire = new PagewireClusterExtension(spec().backend(ClusterBackend.EMBEDDED));
}
