package io.pagewire.systemtests;

import io.pagewire.client.Access;
import io.pagewire.client.Endpoint;
import io.pagewire.client.Pagewire;
import io.pagewire.client.RegistrationMode;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.util.Random;
import java.util.concurrent.TimeUnit;

/** Checks that a node still serves well-behaved applications, for tests that attack it first. */
public final class ServiceChecks {
    private ServiceChecks() {
    }

    /**
     * A write of 3 pages and 17 bytes from an application on node {@code from} to one on node
     * {@code to}, through the SDK over the cluster's own security, lands byte for byte: what a test
     * checks to say a node still serves well-behaved applications after it was attacked.
     */
    public static void assertWriteLands(EmbeddedCluster cluster, int from, int to, String when) throws Exception {
        try (Pagewire a = Pagewire.connect(cluster.node(from).target(), cluster.connectOptions());
                Pagewire b = Pagewire.connect(cluster.node(to).target(), cluster.connectOptions())) {
            Endpoint sender = a.openEndpoint("well-behaved-sender");
            Endpoint receiver = b.openEndpoint("well-behaved-receiver");
            int length = 3 * 4096 + 17;
            long src = sender.allocate(length);
            long dst = receiver.allocate(length);
            byte[] data = new byte[length];
            new Random(length).nextBytes(data);
            sender.store(src, data);
            var all = Access.all();
            var source = sender.register(src, length, RegistrationMode.PINNED, all);
            var target = receiver.register(dst, length, RegistrationMode.ON_DEMAND, all);
            sender.connect(receiver).write(source, src, length, dst, target.rkey()).get(30, TimeUnit.SECONDS);
            org.assertj.core.api.Assertions.assertThat(receiver.load(dst, length)).as(when).isEqualTo(data);
        }
    }
}
