package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/** {@link DataMovementSuite} on two node containers, the data crossing the Docker network between them. */
class DataMovementContainerIT extends DataMovementSuite {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(spec().backend(ClusterBackend.CONTAINERS));
}
