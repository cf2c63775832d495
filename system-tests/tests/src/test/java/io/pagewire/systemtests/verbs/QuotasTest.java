package io.pagewire.systemtests.verbs;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.grpc.ManagedChannel;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.PagewireNode;
import io.pagewire.proto.verbs.OpenSession;
import io.pagewire.proto.verbs.PostRequest;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.VerbsGrpc;
import io.pagewire.proto.verbs.WorkRequest;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Per-node and per-session limits: each is a setting, and passing it is a RESOURCE_EXHAUSTED that
 * names it, for that session only; a client that stops reading its session's events is no longer
 * read from, instead of having its events piled up in the node's heap.
 */
class QuotasTest extends SdkFixture {
    @Test
    void aNodeServesAsManySessionsAsItsLimitAndOneMoreWhenOneEnds() throws Exception {
        start(1, c -> {
            c.verbs().sessionsLimit(3);
            c.kernel().callerShare(1); // one application: the node's limit binds, not its share (CallerShareTest)
        });
        Pagewire client = connect(cluster.node(1));
        List<Endpoint> open = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            open.add(client.openEndpoint("e" + i));
        }
        assertThatThrownBy(() -> client.openEndpoint("one-too-many")).isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageContaining("serves 3 sessions, its limit (pagewire.quota.sessions)");
        open.get(0).close();
        awaitTrue(() -> cluster.node(1).sessions() == 2, 30_000, "the closed session ended");
        client.openEndpoint("after-one-closed").close();
    }

    @Test
    void eachSessionLimitIsRefusedNamingItsSettingAndLeavesOtherSessionsAlone() {
        start(2, c -> {
            c.verbs().virtualBytesPerSession(1 << 20);
            c.nic().queuePairsPerSession(2).regionsPerSession(3).registeredBytesPerSession(64 << 10).countersPerSession(2);
        });
        Pagewire client = connect(cluster.node(1));
        Endpoint greedy = client.openEndpoint("greedy");
        long address = greedy.allocate(1 << 20);
        assertThatThrownBy(() -> greedy.allocate(4096)).isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageContaining("pagewire.quota.virtualBytesPerSession");

        List<MemoryRegion> regions = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            regions.add(greedy.register(address + i * (16 << 10), 16 << 10, RegistrationMode.ON_DEMAND, Access.all()));
        }
        assertThatThrownBy(() -> greedy.register(address + (48 << 10), 4096, RegistrationMode.ON_DEMAND, Access.all()))
                .isInstanceOf(PagewireException.ResourceExhaustedException.class).hasMessageContaining("pagewire.quota.regionsPerSession");
        regions.remove(0).close();
        assertThatThrownBy(() -> greedy.register(address, 48 << 10, RegistrationMode.ON_DEMAND, Access.all()))
                .isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageContaining("pagewire.quota.registeredBytesPerSession");
        greedy.register(address, 32 << 10, RegistrationMode.ON_DEMAND, Access.all());

        greedy.createEventCounter(Access.all());
        greedy.createEventCounter(Access.all());
        assertThatThrownBy(() -> greedy.createEventCounter(Access.all())).isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageContaining("pagewire.quota.countersPerSession");

        QueuePair first = greedy.createQueuePair();
        greedy.createQueuePair();
        assertThatThrownBy(greedy::createQueuePair).isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageContaining("pagewire.quota.queuePairsPerSession");
        first.close();
        greedy.createQueuePair();

        // Another session on the same node has its own allowance.
        Endpoint neighbour = client.openEndpoint("neighbour");
        long mine = neighbour.allocate(1 << 20);
        neighbour.register(mine, 64 << 10, RegistrationMode.PINNED, Access.all());
        neighbour.createQueuePair();
        neighbour.createEventCounter(Access.all());
    }

    /**
     * A post refused for a limit is {@code ResourceExhaustedException}, and an invalid one
     * {@code InvalidRequestException}, whether it came through the rings (the first session) or the
     * session stream (the second, connected without shared memory): the refusal carries its status.
     */
    @Test
    void outstandingWorkRequestsAreLimitedPerSessionAndPerNodeAndCountedBackWhenDone() throws Exception {
        start(1, c -> {
            c.nic().workRequestsPerSession(8).workRequestsPerNode(12);
            c.kernel().callerShare(1); // both sessions are one application's: the node limit binds, not its share
        });
        PagewireNode node = cluster.node(1);
        Pagewire client = connect(node);
        Endpoint first = client.openEndpoint("first");
        long address = first.allocate(64 << 10);
        MemoryRegion buffers = first.register(address, 64 << 10, RegistrationMode.PINNED, Access.all());
        QueuePair qp = first.createQueuePair();
        assertThatThrownBy(() -> qp.await(qp.postReceive(buffers, address + (64 << 10), 4096))).as("outside its region")
                .isInstanceOf(PagewireException.InvalidRequestException.class);
        List<CompletableFuture<Completion>> posted = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            posted.add(qp.postReceive(buffers, address + i * 4096L, 4096));
        }
        assertThat(first.sharesMemory()).as("the first session posts through its rings").isTrue();
        assertThatThrownBy(() -> qp.await(qp.postReceive(buffers, address, 4096))).isInstanceOf(PagewireException.ResourceExhaustedException.class)
                .hasMessageContaining("pagewire.quota.workRequestsPerSession");

        Pagewire overStream = track(Pagewire.connect(node.target(), connectOptions().withSharedMemory(false)));
        Endpoint second = overStream.openEndpoint("second");
        assertThat(second.sharesMemory()).as("the second session posts on its stream").isFalse();
        long other = second.allocate(64 << 10);
        MemoryRegion otherBuffers = second.register(other, 64 << 10, RegistrationMode.PINNED, Access.all());
        QueuePair otherQp = second.createQueuePair();
        assertThatThrownBy(() -> otherQp.await(otherQp.postReceive(otherBuffers, other - 4096, 4096))).as("outside its region")
                .isInstanceOf(PagewireException.InvalidRequestException.class);
        for (int i = 0; i < 4; i++) {
            otherQp.postReceive(otherBuffers, other + i * 4096L, 4096);
        }
        assertThatThrownBy(() -> otherQp.await(otherQp.postReceive(otherBuffers, other, 4096)))
                .isInstanceOf(PagewireException.ResourceExhaustedException.class).hasMessageContaining("pagewire.quota.workRequestsPerNode");
        assertThat(node.nic().workRequestsOutstanding()).isEqualTo(12);

        qp.close(); // its receives complete as flushed: they are no longer outstanding
        awaitTrue(() -> node.nic().workRequestsOutstanding() == 4, 10_000, "the closed pair's receives counted back");
        awaitTrue(() -> posted.stream().allMatch(CompletableFuture::isDone), 10_000, "the closed pair's receives completed (flushed)");
        otherQp.postReceive(otherBuffers, other + 4 * 4096L, 4096);
        awaitTrue(() -> node.nic().workRequestsOutstanding() == 5, 10_000, "a receive posted in the room the closed pair left");
    }

    @Test
    void aClientThatStopsReadingIsNoLongerReadAndLosesNothingWhenItReadsAgain() throws Exception {
        start(1, c -> { });
        PagewireNode node = cluster.node(1);
        ManagedChannel channel = cluster.openChannel(node);
        try {
            AtomicLong refusals = new AtomicLong();
            CompletableFuture<ClientCallStreamObserver<SessionRequest>> started = new CompletableFuture<>();
            CompletableFuture<Void> opened = new CompletableFuture<>();
            VerbsGrpc.newStub(channel).session(new ClientResponseObserver<SessionRequest, SessionEvent>() {
                @Override
                public void beforeStart(ClientCallStreamObserver<SessionRequest> stream) {
                    stream.disableAutoRequestWithInitial(1); // the Opened event, then nothing until asked
                    started.complete(stream);
                }

                @Override
                public void onNext(SessionEvent event) {
                    if (event.hasOpened()) {
                        opened.complete(null);
                    } else if (event.hasRefused()) {
                        refusals.incrementAndGet();
                    }
                }

                @Override
                public void onError(Throwable t) {
                    opened.completeExceptionally(t);
                }

                @Override
                public void onCompleted() {
                }
            });
            ClientCallStreamObserver<SessionRequest> stream = started.get(10, TimeUnit.SECONDS);
            stream.onNext(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName("not-reading")).build());
            opened.get(10, TimeUnit.SECONDS);

            // Posts to a queue pair that does not exist: each one answered with a Refused event nobody reads.
            PostRequest.Builder post = PostRequest.newBuilder().setQpn(987_654);
            for (int i = 0; i < 16; i++) {
                post.addRequests(WorkRequest.newBuilder().setWrId(i));
            }
            SessionRequest request = SessionRequest.newBuilder().setPost(post).build();
            long sent = 0;
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (sent < 200_000 && System.nanoTime() < deadline) {
                if (stream.isReady()) {
                    stream.onNext(request);
                    sent++;
                } else {
                    Thread.sleep(1);
                }
            }
            Thread.sleep(500);
            double handled = sessionMessagesRead(node);
            System.out.printf("QuotasTest: the client sent %d posts of 16 in 5 s; the node read %.0f of its messages%n", sent, handled);
            assertThat(handled).as("the node stopped reading a client that does not read its events").isLessThan(10_000);
            assertThat(sent).as("what the client sent beyond that waits in the transport's window, not in the node").isGreaterThan((long) handled);
            // Everyone else is served meanwhile.
            Pagewire other = connect(node);
            other.openEndpoint("served").close();

            stream.request(Integer.MAX_VALUE);
            long expected = sent * 16;
            awaitTrue(() -> refusals.get() == expected, 30_000, "every refusal arrives once the client reads (" + expected + ")");
            stream.onCompleted();
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    /** Session-stream messages the node's service has read, as gRPC's server meter counts them. */
    private static double sessionMessagesRead(PagewireNode node) {
        Matcher m = Pattern.compile(
                "grpc_server_requests_received_messages_total\\{method=\"Session\"[^}]*} ([0-9.E]+)").matcher(node.registry().scrape());
        assertThat(m.find()).as("gRPC's meter of messages read on the session stream").isTrue();
        return Double.parseDouble(m.group(1));
    }
}
