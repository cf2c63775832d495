package io.pagewire.node.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.PagewireNode;
import io.pagewire.proto.verbs.OpenSession;
import io.pagewire.proto.verbs.PostRequest;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.VerbsGrpc;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** A session stream used out of order by a hand-written client: refused, and nothing is left open behind it. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SessionStreamTest extends SdkFixture {
    @Test
    void aPostBeforeOpenSessionIsRefusedAndAnOpenAfterItOpensNothing() throws Exception {
        start(1, c -> { });
        PagewireNode node = cluster.node(1);
        ManagedChannel channel = cluster.openChannel(node);
        try {
            for (int i = 0; i < 50; i++) {
                RecordedStream recorded = new RecordedStream(channel);
                StreamObserver<SessionRequest> stream = recorded.requests;
                CompletableFuture<Status> ended = recorded.ended;
                stream.onNext(SessionRequest.newBuilder().setPost(PostRequest.newBuilder().setQpn(1)).build());
                stream.onNext(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName("late")).build());
                Status status = ended.get(10, TimeUnit.SECONDS);
                assertThat(status.getCode()).isEqualTo(Status.Code.FAILED_PRECONDITION);
                assertThat(status.getDescription()).isEqualTo("a session must start with OpenSession");
                stream.onCompleted();
            }
            Thread.sleep(200);
            assertThat(node.sessions()).as("no session opened behind a refusal").isZero();
            assertThat(node.nic().endpoints()).as("and no endpoint").isEmpty();
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    @Test
    void aWatchOfAnUnknownCounterIsRefusedAloneAndTheSessionGoesOn() throws Exception {
        start(1, c -> { });
        PagewireNode node = cluster.node(1);
        ManagedChannel channel = cluster.openChannel(node);
        try {
            RecordedStream recorded = new RecordedStream(channel);
            java.util.concurrent.BlockingQueue<SessionEvent> events = recorded.events;
            CompletableFuture<Status> ended = recorded.ended;
            StreamObserver<SessionRequest> stream = recorded.requests;
            stream.onNext(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName("watcher")).build());
            SessionEvent opened = events.poll(10, TimeUnit.SECONDS);
            assertThat(opened).isNotNull();
            assertThat(opened.hasOpened()).isTrue();
            stream.onNext(SessionRequest.newBuilder().setWatch(io.pagewire.proto.verbs.WatchCounter.newBuilder().setCounterId(4242)).build());
            SessionEvent refused = events.poll(10, TimeUnit.SECONDS);
            assertThat(refused).isNotNull();
            assertThat(refused.hasWatchRefused()).as(refused.toString()).isTrue();
            assertThat(refused.getWatchRefused().getCounterId()).isEqualTo(4242);
            assertThat(refused.getWatchRefused().getError()).contains("4242");
            // Still open: a post on an unknown queue pair is refused as a post, on the same stream.
            stream.onNext(SessionRequest.newBuilder().setPost(PostRequest.newBuilder().setQpn(77)
                    .addRequests(io.pagewire.proto.verbs.WorkRequest.newBuilder().setWrId(5))).build());
            SessionEvent post = events.poll(10, TimeUnit.SECONDS);
            assertThat(post).isNotNull();
            assertThat(post.hasRefused()).as(post.toString()).isTrue();
            assertThat(post.getRefused().getWrId()).isEqualTo(5);
            assertThat(ended).isNotDone();
            assertThat(node.sessions()).isEqualTo(1);
            stream.onCompleted();
            assertThat(ended.get(10, TimeUnit.SECONDS).getCode()).isEqualTo(Status.Code.OK);
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }

    /** A session stream whose events are kept in order and whose end is a future. */
    private static final class RecordedStream {
        final java.util.concurrent.BlockingQueue<SessionEvent> events = new java.util.concurrent.LinkedBlockingQueue<>();
        final CompletableFuture<Status> ended = new CompletableFuture<>();
        final StreamObserver<SessionRequest> requests;

        RecordedStream(ManagedChannel channel) {
            requests = VerbsGrpc.newStub(channel).session(new StreamObserver<SessionEvent>() {
                @Override
                public void onNext(SessionEvent event) {
                    events.add(event);
                }

                @Override
                public void onError(Throwable t) {
                    ended.complete(Status.fromThrowable(t));
                }

                @Override
                public void onCompleted() {
                    ended.complete(Status.OK);
                }
            });
        }
    }
}
