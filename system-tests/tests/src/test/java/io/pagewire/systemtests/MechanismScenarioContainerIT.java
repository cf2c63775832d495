package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link MechanismScenarioSuite} on two node containers, a fresh pair per test, the meters read as an operator would. */
class MechanismScenarioContainerIT extends MechanismScenarioSuite {
    @RegisterExtension
    final PagewireClusterExtension pagewire = new PagewireClusterExtension(spec().backend(ClusterBackend.CONTAINERS));
}
