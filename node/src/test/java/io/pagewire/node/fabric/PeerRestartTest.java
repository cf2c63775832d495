package io.pagewire.node.fabric;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.NodeContext;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.CompletionStatus;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.QueuePairState;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A peer that restarts says so in its hellos (a new incarnation): the queue pairs connected to its
 * former self fail at once, instead of retrying into queue pairs that no longer exist.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class PeerRestartTest {
    private static NodeContext context(String id, int port) {
        // A retry budget of minutes: only the restart can end the write below within the test's time.
        NodeContext context = new NodeContext().nodeId(id).transport(Transport.NETTY).host("127.0.0.1").port(port).metricsPort(-1);
        context.nic().ackTimeoutNs(10_000_000_000L);
        context.security().plaintext();
        return context.acceptPeer("node-1").acceptPeer("node-2");
    }

    @Test
    void queuePairsToARestartedPeerFailAtOnceWithTheReason() throws Exception {
        PagewireNode one = PagewireNode.start(context("node-1", 0));
        PagewireNode two = PagewireNode.start(context("node-2", 0));
        PagewireNode twoAgain = null;
        try {
            one.connect("node-2", two.target());
            two.connect("node-1", one.target());
            awaitLink(one, "node-2");
            Endpoint local = one.nic().openEndpoint("local");
            Endpoint remote = two.nic().openEndpoint("remote");
            CompletionQueue cq = one.nic().createCompletionQueue();
            QueuePair qp = one.nic().createQueuePair(local, cq);
            QueuePair far = two.nic().createQueuePair(remote, two.nic().createCompletionQueue());
            qp.connect(far.address());
            far.connect(qp.address());
            long src = local.space().allocate(4096);
            MemoryRegion from = local.register(src, 4096, RegistrationMode.PINNED, Access.all());
            long dst = remote.space().allocate(4096);
            MemoryRegion to = remote.register(dst, 4096, RegistrationMode.PINNED, Access.all());
            qp.post(WorkRequest.write(1, from.lkey(), src, 64, dst, to.rkey()));
            Completion first = cq.take(10, TimeUnit.SECONDS);
            assertThat(first).isNotNull();
            assertThat(first.ok()).isTrue();

            String target = two.target();
            int port = Integer.parseInt(target.substring(target.lastIndexOf(':') + 1));
            two.close();
            qp.post(WorkRequest.write(2, from.lkey(), src, 64, dst, to.rkey()));
            twoAgain = PagewireNode.start(context("node-2", port));
            twoAgain.connect("node-1", one.target());
            Completion failed = cq.take(20, TimeUnit.SECONDS);
            assertThat(failed).as("the write to the old node-2 ended\n" + qp.describe()).isNotNull();
            assertThat(failed.status()).isEqualTo(CompletionStatus.REMOTE_OPERATIONAL_ERROR);
            assertThat(failed.error()).contains("node-2 restarted").contains("queue pair " + far.qpn() + " no longer exists");
            assertThat(qp.state()).isEqualTo(QueuePairState.ERROR);
        } finally {
            if (twoAgain != null) {
                twoAgain.close();
            }
            two.close();
            one.close();
        }
    }

    private static void awaitLink(PagewireNode node, String peer) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!node.fabric().connectedPeers().contains(peer)) {
            assertThat(System.nanoTime() < deadline).as(node.id() + " linked to " + peer).isTrue();
            Thread.sleep(5);
        }
    }
}
