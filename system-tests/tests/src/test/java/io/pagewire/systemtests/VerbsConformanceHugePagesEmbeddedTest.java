package io.pagewire.systemtests;

import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * {@link VerbsConformanceSuite} on nodes whose pages are 2 MiB huge pages: upstream's
 * {@code test_odp_rc_huge_traffic} and {@code test_odp_rc_huge_user_addr_traffic}, extended to every
 * scenario (every buffer lies in one huge page, and paging it out moves 2 MiB).
 */
class VerbsConformanceHugePagesEmbeddedTest extends VerbsConformanceSuite {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(spec()
            .set("pagewire.kernel.pageSizeBytes", "2MiB")
            .set("pagewire.kernel.physicalMemoryBytes", "128MiB")
            .set("pagewire.kernel.swapBytes", "256MiB")
            .set("pagewire.kernel.systemBufferBytes", "4MiB")
            .backend(ClusterBackend.EMBEDDED));
}
