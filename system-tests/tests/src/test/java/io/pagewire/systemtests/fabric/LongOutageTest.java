package io.pagewire.systemtests.fabric;

import io.pagewire.node.fabric.Fabric;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.systemtests.PrintClusterOnFailure;
import io.pagewire.node.Transport;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * With the default settings, writes in flight survive a link outage of seconds, not just of one:
 * the retry budget (200 ms acknowledgement timeout backing off to 800 ms, 7 retransmissions: about
 * 5.4 s) outlasts a 2 s cut plus the lanes' redial after it (back-off capped at 2 s), so nothing is
 * lost and no queue pair fails. An outage longer than the budget less the redial back-off (about
 * 3.4 s) ends in RETRY_EXCEEDED, as in RC; pagewire.nic.retryCount and ackTimeoutNs set the budget.
 */
class LongOutageTest {
    private static final int WRITES = 32;
    private static final int SLOT = 64 << 10;

    private EmbeddedCluster cluster;

    @RegisterExtension
    final PrintClusterOnFailure printCountersOnFailure = new PrintClusterOnFailure(() -> cluster);

    @AfterEach
    void stop() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void writesInFlightOutliveALinkCutOfTwoSecondsWithDefaultSettings() throws Exception {
        cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> c.kernel().physicalMemoryBytes(16L << 20).swapBytes(0));
        try (Pagewire a = Pagewire.connect(cluster.node(1).target(), cluster.connectOptions());
                Pagewire b = Pagewire.connect(cluster.node(2).target(), cluster.connectOptions())) {
            Endpoint local = a.openEndpoint("outage-writer");
            Endpoint remote = b.openEndpoint("outage-target");
            long length = (long) WRITES * SLOT;
            long src = local.allocate(length);
            long dst = remote.allocate(length);
            byte[] data = new byte[(int) length];
            new Random(25).nextBytes(data);
            local.store(src, data);
            MemoryRegion from = local.register(src, length, RegistrationMode.PINNED, Access.all());
            MemoryRegion to = remote.register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
            QueuePair qp = local.connect(remote);
            qp.await(qp.write(from, src, SLOT, dst, to.rkey()));

            cut(true);
            long cutAt = System.nanoTime();
            List<CompletableFuture<Completion>> writes = new ArrayList<>();
            for (int i = 0; i < WRITES; i++) {
                writes.add(qp.write(from, src + (long) i * SLOT, SLOT, dst + (long) i * SLOT, to.rkey()));
            }
            Thread.sleep(2000);
            cut(false);
            long healedAt = System.nanoTime();
            for (CompletableFuture<Completion> write : writes) {
                assertThat(qp.await(write).bytes()).isEqualTo(SLOT);
            }
            System.out.printf("LongOutageTest: a %.1f s cut; every write completed %.2f s after the heal%n", (healedAt - cutAt) / 1e9,
                    (System.nanoTime() - healedAt) / 1e9);
            assertThat(remote.load(dst, (int) length)).as("every write landed once, intact").isEqualTo(data);
        }
    }

    private void cut(boolean cut) {
        for (String[] pair : new String[][] {{"node-1", "node-2"}, {"node-2", "node-1"}}) {
            Fabric fabric = cluster.node(Integer.parseInt(pair[0].substring(5))).fabric();
            if (cut) {
                fabric.cut(pair[1]);
            } else {
                fabric.heal(pair[1]);
            }
        }
    }
}
