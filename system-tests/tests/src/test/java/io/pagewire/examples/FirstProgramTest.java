package io.pagewire.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.ConnectOptions;
import io.pagewire.client.RegistrationMode;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import io.pagewire.testkit.PagewireClusterExtension;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/** The README's first program, against two nodes: the message lands, and the target region counted it. */
class FirstProgramTest {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(ClusterSpec.nodes(2));

    @Test
    void theMessageLandsInTheOtherApplicationsMemory(PagewireCluster cluster) {
        FirstProgram.Result result = FirstProgram.run(cluster.node(1).target(), cluster.node(2).target(),
                ConnectOptions.defaults().withSecurity(cluster.clientSecurity()));
        assertThat(result.message()).isEqualTo("hello, pagewire");
        assertThat(result.target().bytesReceived()).isEqualTo(15);
        assertThat(result.target().mode()).isEqualTo(RegistrationMode.SHADOW);
    }
}
