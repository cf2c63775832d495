package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.TestData;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.proto.verbs.Access;
import io.pagewire.proto.verbs.AwaitEventCounterRequest;
import io.pagewire.proto.verbs.AwaitEventCounterResponse;
import io.pagewire.proto.verbs.CreateEventCounterRequest;
import io.pagewire.proto.verbs.EndpointRef;
import io.pagewire.proto.verbs.OpenSession;
import io.pagewire.proto.verbs.PostRequest;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.VerbsGrpc;
import io.pagewire.proto.verbs.WatchCounter;
import io.pagewire.proto.verbs.WorkRequest;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
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
            BlockingQueue<SessionEvent> events = recorded.events;
            CompletableFuture<Status> ended = recorded.ended;
            StreamObserver<SessionRequest> stream = recorded.requests;
            stream.onNext(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName("watcher")).build());
            SessionEvent opened = events.poll(10, TimeUnit.SECONDS);
            assertThat(opened).isNotNull();
            assertThat(opened.hasOpened()).isTrue();
            stream.onNext(SessionRequest.newBuilder().setWatch(WatchCounter.newBuilder().setCounterId(4242)).build());
            SessionEvent refused = events.poll(10, TimeUnit.SECONDS);
            assertThat(refused).isNotNull();
            assertThat(refused.hasWatchRefused()).as(refused.toString()).isTrue();
            assertThat(refused.getWatchRefused().getCounterId()).isEqualTo(4242);
            assertThat(refused.getWatchRefused().getError()).contains("4242");
            // Still open: a post on an unknown queue pair is refused as a post, on the same stream.
            stream.onNext(SessionRequest.newBuilder().setPost(PostRequest.newBuilder().setQpn(77)
                    .addRequests(WorkRequest.newBuilder().setWrId(5))).build());
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
        final BlockingQueue<SessionEvent> events = new LinkedBlockingQueue<>();
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

    /**
     * AwaitEventCounter from a hand-written client: a wait its caller gives up on (its deadline
     * passes) leaves no handler on the counter, and one whose session ends is answered UNAVAILABLE
     * at once, not at its timeout an hour later.
     */
    @Test
    void aCounterWaitThatIsAbandonedOrOutlivesItsSessionLeavesNothingBehind() throws Exception {
        start(1, c -> { });
        PagewireNode node = cluster.node(1);
        ManagedChannel channel = cluster.openChannel(node);
        try {
            RecordedStream recorded = new RecordedStream(channel);
            recorded.requests.onNext(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName("waiter")).build());
            SessionEvent opened = recorded.events.poll(10, TimeUnit.SECONDS);
            assertThat(opened).isNotNull();
            EndpointRef ref = EndpointRef.newBuilder()
                    .setEndpointId(opened.getOpened().getEndpointId()).setSessionKey(opened.getOpened().getSessionKey()).build();
            VerbsGrpc.VerbsBlockingStub verbs = VerbsGrpc.newBlockingStub(channel);
            int counterId = verbs.createEventCounter(CreateEventCounterRequest.newBuilder().setEndpoint(ref)
                    .addAccess(Access.REMOTE_WRITE).build()).getCounterId();
            EventCounter onNode = node.nic().endpoint(ref.getEndpointId()).eventCounter(counterId);
            AwaitEventCounterRequest anHour = AwaitEventCounterRequest.newBuilder()
                    .setEndpoint(ref).setCounterId(counterId).setTarget(1).setTimeoutMs(TimeUnit.HOURS.toMillis(1)).build();

            io.grpc.StatusRuntimeException gaveUp = org.assertj.core.api.Assertions.catchThrowableOfType(
                    () -> verbs.withDeadlineAfter(300, TimeUnit.MILLISECONDS).awaitEventCounter(anHour), io.grpc.StatusRuntimeException.class);
            assertThat(gaveUp.getStatus().getCode()).isEqualTo(Status.Code.DEADLINE_EXCEEDED);
            TestData.awaitTrue(() -> onNode.handlerCount() == 0, 5_000, "the abandoned wait's handler removed");

            CompletableFuture<Status> orphaned = new CompletableFuture<>();
            VerbsGrpc.newStub(channel).awaitEventCounter(anHour, new StreamObserver<>() {
                @Override
                public void onNext(AwaitEventCounterResponse value) {
                    orphaned.complete(Status.OK);
                }

                @Override
                public void onError(Throwable t) {
                    orphaned.complete(Status.fromThrowable(t));
                }

                @Override
                public void onCompleted() {
                }
            });
            TestData.awaitTrue(() -> onNode.handlerCount() == 1, 5_000, "the second wait registered");
            recorded.requests.onCompleted(); // the session ends, and with it the endpoint and its counter
            Status answer = orphaned.get(10, TimeUnit.SECONDS);
            assertThat(answer.getCode()).isEqualTo(Status.Code.UNAVAILABLE);
            assertThat(answer.getDescription()).contains("ended while this wait for event counter " + counterId + " was on");
            assertThat(onNode.handlerCount()).isZero();
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
    }
}
