package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.PagewireNode;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.junit.jupiter.api.Test;

/**
 * One application that takes all it can of every node-wide pool (sessions, frames and swap, the pin
 * limit, receive credits, outstanding work requests) stops at its share of each, and another
 * application (a caller of its own, by its certificate) still gets all of them on the same node.
 */
class CallerShareTest extends SdkFixture {
    private static final int MIB = 1 << 20;

    private Pagewire as(PagewireNode node, String application) {
        TestbedCertificates.in(cluster.certificates()).issueApplication(application);
        return track(Pagewire.connect(node.target(), cluster.connectOptions()
                .withSecurity(ClientSecurity.mutualTls(cluster.certificates(), application))));
    }

    @Test
    void oneApplicationHoldingAllItCanOfEveryPoolCannotRefuseAnother() {
        // 4 MiB of frames and 4 MiB of swap (2048 pages), a pin limit of 3 MiB, 16 credits, 8 sessions, 16 work requests.
        start(1, c -> {
            c.kernel().physicalMemoryBytes(4 * MIB).swapBytes(4 * MIB).systemBufferBytes(64 << 10);
            c.verbs().sessionsLimit(8);
            c.nic().workRequestsPerNode(16).workRequestsPerSession(16);
        });
        PagewireNode node = cluster.node(1);
        Pagewire greedy = as(node, "greedy");

        List<Endpoint> sessions = new ArrayList<>();
        assertThatThrownBy(() -> {
            while (true) {
                sessions.add(greedy.openEndpoint("greedy-" + sessions.size()));
            }
        }).isInstanceOf(PagewireException.ResourceExhaustedException.class).hasMessageContaining("pagewire.quota.callerShare");
        assertThat(sessions).as("half the node's sessions").hasSize(4);
        Endpoint hog = sessions.get(0);

        long memory = hog.allocate(8L * MIB);
        int[] stored = {0};
        assertThatThrownBy(() -> {
            for (; stored[0] < 8; stored[0]++) {
                hog.store(memory + (long) stored[0] * MIB, new byte[MIB]);
            }
        }).isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageContaining("past its share").hasMessageContaining("pagewire.quota.callerShare");
        assertThat(stored[0]).as("MiB stored: half the node's frames and swap").isEqualTo(4);

        assertThatThrownBy(() -> hog.register(memory, 2L * MIB, RegistrationMode.PINNED, Access.all()))
                .isInstanceOf(PagewireException.ResourceExhaustedException.class).hasMessageContaining("pin share exceeded");
        MemoryRegion pinned = hog.register(memory, MIB, RegistrationMode.PINNED, Access.all());

        QueuePair receiver = hog.createQueuePair();
        List<QueuePair> pairs = new ArrayList<>(List.of(receiver));
        assertThatThrownBy(() -> {
            while (true) {
                pairs.add(sessions.get(1 + pairs.size() % 3).createQueuePair());
            }
        }).isInstanceOf(PagewireException.ResourceExhaustedException.class).hasMessageContaining("receive credits")
                .hasMessageContaining("pagewire.quota.callerShare");
        assertThat(pairs).as("queue pairs on half the node's credits").isNotEmpty();

        List<CompletableFuture<Completion>> receives = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            receives.add(receiver.postReceive(pinned, memory + i * 4096L, 4096));
        }
        // A refused post is reported on its own, as a limit reached, naming the share.
        assertThatThrownBy(() -> receiver.await(receiver.postReceive(pinned, memory, 4096)))
                .isInstanceOf(PagewireException.ResourceExhaustedException.class).hasMessageContaining("its share (pagewire.quota.callerShare)");
        assertThat(receives).as("the receives within its share stay posted").noneMatch(CompletableFuture::isDone);
        assertThat(node.nic().workRequestsOutstanding()).as("half the node's work requests").isEqualTo(8);

        // Another application gets a session, memory (greedy's pages go to swap), pins, credits and work requests.
        Pagewire another = as(node, "other");
        Endpoint other = another.openEndpoint("other");
        Endpoint peer = another.openEndpoint("other-peer");
        long mine = other.allocate(MIB);
        byte[] data = new byte[MIB];
        Arrays.fill(data, (byte) 7);
        other.store(mine, data);
        MemoryRegion source = other.register(mine, MIB, RegistrationMode.PINNED, Access.all());
        long theirs = peer.allocate(MIB);
        MemoryRegion target = peer.register(theirs, MIB, RegistrationMode.ON_DEMAND, Access.all());
        QueuePair qp = other.connect(peer);
        assertThat(qp.await(qp.write(source, mine, MIB, theirs, target.rkey())).bytes()).isEqualTo(MIB);
        assertThat(peer.load(theirs + MIB - 8, 8)).containsOnly((byte) 7);
    }
}
