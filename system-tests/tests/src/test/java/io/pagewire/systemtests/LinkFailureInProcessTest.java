package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link LinkFailureSuite} on nodes in this JVM over gRPC's in-process transport: no sockets, no TLS. */
class LinkFailureInProcessTest extends LinkFailureSuite {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(spec().backend(ClusterBackend.IN_PROCESS));
}
