package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link MechanismScenarioSuite} on nodes in this JVM over gRPC's in-process transport: no sockets, no TLS. */
class MechanismScenarioInProcessTest extends MechanismScenarioSuite {
    @RegisterExtension
    final PagewireClusterExtension pagewire = new PagewireClusterExtension(spec().backend(ClusterBackend.IN_PROCESS));
}
