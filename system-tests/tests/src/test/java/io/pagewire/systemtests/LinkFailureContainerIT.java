package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link LinkFailureSuite} on two node containers; a cut is iptables dropping every packet between their addresses. */
class LinkFailureContainerIT extends LinkFailureSuite {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(spec().backend(ClusterBackend.CONTAINERS));
}
