package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Access;
import io.pagewire.client.Advice;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.Pagewire;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.PagewireNode;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A client that registers and opens sessions as fast as it can is slowed to the node's control rate
 * (its calls wait, they are not lost), and another application, a caller of its own, is not.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ControlPacingTest extends SdkFixture {
    @Test
    void aCallerOverItsControlRateIsSlowedAndAnotherIsNot() {
        start(1, c -> c.verbs().controlOpsPerSecond(20).controlBurst(10));
        PagewireNode node = cluster.node(1);
        TestbedCertificates.in(cluster.certificates()).issueApplication("flooder");
        try (Pagewire flooder = Pagewire.connect(node.target(), cluster.connectOptions()
                .withSecurity(ClientSecurity.mutualTls(cluster.certificates(), "flooder")))) {
            long started = System.nanoTime();
            Endpoint endpoint = flooder.openEndpoint("flood"); // an open and, with rings, nothing more that is paced
            long address = endpoint.allocate(1 << 20);
            for (int i = 0; i < 20; i++) {
                endpoint.register(address, 1 << 20, RegistrationMode.ON_DEMAND, Access.all()).close();
            }
            for (int i = 0; i < 5; i++) {
                flooder.openEndpoint("flood-" + i).close();
            }
            EventCounter counter = endpoint.createEventCounter(Access.all());
            endpoint.register(address, 1 << 20, RegistrationMode.ON_DEMAND, Access.all()).advise(Advice.PREFETCH, address, 4096);
            double seconds = (System.nanoTime() - started) / 1e9;
            // 49 paced operations (the opens and closes of sessions, the allocation, 21 registrations and
            // their deregistrations, a counter, a prefetch) at 20 per second after a burst of 10: at
            // least (49 - 10) / 20 s, whatever the machine.
            assertThat(seconds).as("the flooder was held to its rate").isGreaterThanOrEqualTo(1.9);
            // An operation would have to take 50 ms of its own to find its start already due: on a
            // loaded machine a few may (at 50 per second, 64 of 85 waited once in CI), so not all 39 need to.
            long delayed = node.controlOperationsDelayed();
            assertThat(delayed).as("its operations started later, the counter, registration and prefetch too").isGreaterThanOrEqualTo(30);
            for (int i = 0; i < 100; i++) {
                counter.value();
            }
            assertThat(node.controlOperationsDelayed()).as("reading a counter (polling) is not paced").isEqualTo(delayed);

            Pagewire other = connect(node);
            Endpoint own = other.openEndpoint("other");
            long mine = own.allocate(4096);
            for (int i = 0; i < 4; i++) {
                own.register(mine, 4096, RegistrationMode.PINNED, Access.all()).close();
            }
            assertThat(node.controlOperationsDelayed()).as("the other application, within its own burst, waited for nothing")
                    .isEqualTo(delayed);
            endpoint.close();
        }
    }
}
