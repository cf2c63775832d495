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
                CompletableFuture<Status> ended = new CompletableFuture<>();
                StreamObserver<SessionRequest> stream = VerbsGrpc.newStub(channel).session(new StreamObserver<SessionEvent>() {
                    @Override
                    public void onNext(SessionEvent event) {
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
}
