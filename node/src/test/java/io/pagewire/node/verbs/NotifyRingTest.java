package io.pagewire.node.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.RegistrationMode;
import io.pagewire.client.examples.NotifyRing;
import io.pagewire.client.examples.SendRing;
import io.pagewire.node.PagewireNode;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** The example applications from the README, run against a three-node cluster in every mode. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class NotifyRingTest extends SdkFixture {
    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void theTokenGoesAroundTheRingAndEveryMessageArrivesIntact(RegistrationMode mode) {
        start(3, c -> { });
        List<String> targets = cluster.nodes().stream().map(PagewireNode::target).toList();
        NotifyRing.Result result = NotifyRing.run(targets, 20, 9000, mode, cluster.connectOptions());
        assertThat(result.members()).isEqualTo(3);
        assertThat(result.hops()).isEqualTo(60);
        assertThat(result.averageHopMicros()).isPositive();
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void theTokenGoesAroundAsSendsIntoPostedReceives(RegistrationMode mode) {
        start(3, c -> { });
        List<String> targets = cluster.nodes().stream().map(PagewireNode::target).toList();
        NotifyRing.Result result = SendRing.run(targets, 20, 9000, mode, cluster.connectOptions());
        assertThat(result.hops()).isEqualTo(60);
        assertThat(cluster.nodes().stream().mapToLong(n -> n.nic().counters().get(io.pagewire.node.nic.NicCounter.RECEIVES_COMPLETED)).sum())
                .as("every hop filled a posted receive").isEqualTo(60);
    }
}
