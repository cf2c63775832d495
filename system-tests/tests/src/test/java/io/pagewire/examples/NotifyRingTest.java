package io.pagewire.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.client.RegistrationMode;
import io.pagewire.testkit.ClusterNode;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import io.pagewire.testkit.PagewireClusterExtension;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The example applications from the README, run against a three-node cluster in every mode. */
class NotifyRingTest {
    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(ClusterSpec.nodes(3));

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void theTokenGoesAroundTheRingAndEveryMessageArrivesIntact(RegistrationMode mode, PagewireCluster cluster) {
        NotifyRing.Result result = NotifyRing.run(targets(cluster), 20, 9000, mode, options(cluster));
        assertThat(result.members()).isEqualTo(3);
        assertThat(result.hops()).isEqualTo(60);
        assertThat(result.averageHopMicros()).isPositive();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void theTokenGoesAroundAsSendsIntoPostedReceives(RegistrationMode mode, PagewireCluster cluster) {
        double before = receivesCompleted(cluster);
        NotifyRing.Result result = SendRing.run(targets(cluster), 20, 9000, mode, options(cluster));
        assertThat(result.hops()).isEqualTo(60);
        assertThat(receivesCompleted(cluster) - before).as("every hop filled a posted receive").isEqualTo(60);
    }

    private static List<String> targets(PagewireCluster cluster) {
        return cluster.nodes().stream().map(ClusterNode::target).toList();
    }

    private static ConnectOptions options(PagewireCluster cluster) {
        return ConnectOptions.defaults().withSecurity(cluster.clientSecurity());
    }

    private static double receivesCompleted(PagewireCluster cluster) {
        double sum = 0;
        for (ClusterNode node : cluster.nodes()) {
            Pagewire connection = node.connect(options(cluster).withSharedMemory(false));
            sum += connection.stats().getOrDefault("pagewire_receives_completed_total", Map.of()).values().stream()
                    .mapToDouble(Double::doubleValue).sum();
        }
        return sum;
    }
}
