package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.protobuf.Descriptors.EnumValueDescriptor;
import com.google.protobuf.Descriptors.FieldDescriptor;
import com.google.protobuf.Message;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.pagewire.client.Access;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.PagewireNode;
import io.pagewire.proto.verbs.EndpointRef;
import io.pagewire.proto.verbs.OpenSession;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.VerbsGrpc;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Fuzzes every unary verbs RPC with requests whose every field is drawn from the values that break
 * programs (zero, one, negative, the largest, wrapping, huge strings, unknown enum numbers), against a
 * real session's endpoint most of the time: each call ends with a clear status — never UNKNOWN,
 * INTERNAL or a hang — and afterwards the node still serves a well-behaved client. The seed is printed,
 * so a failure can be replayed with {@code -Dpagewire.fuzz.seed=N}.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class VerbsFuzzTest extends SdkFixture {
    private static final int INPUTS = Integer.getInteger("pagewire.fuzz.inputs", 100_000);

    @Test
    void everyFuzzedVerbsCallGetsAClearStatusAndTheNodeKeepsServing() throws Exception {
        long seed = Long.getLong("pagewire.fuzz.seed", System.nanoTime());
        System.out.println("VerbsFuzzTest seed " + seed + " (replay with -Dpagewire.fuzz.seed=" + seed + ")");
        SplittableRandom random = new SplittableRandom(seed);
        start(2, c -> { });
        PagewireNode node = cluster.node(1);
        ManagedChannel channel = cluster.openChannel(node);
        try {
            EndpointRef ref = openSession(channel);
            List<MethodDescriptor<Message, Message>> methods = unaryMethods();
            Map<Status.Code, Integer> codes = new EnumMap<>(Status.Code.class);
            Map<String, String> bad = new TreeMap<>();
            Map<String, Long> nanosByMethod = new TreeMap<>();
            List<String> slow = new ArrayList<>();
            for (int i = 0; i < INPUTS; i++) {
                MethodDescriptor<Message, Message> method = methods.get(random.nextInt(methods.size()));
                Message request = fuzz(prototype(method), ref, random, 0);
                long callStart = System.nanoTime();
                Status.Code code;
                try {
                    ClientCalls.blockingUnaryCall(channel, method, CallOptions.DEFAULT.withDeadlineAfter(deadlineMs(method), TimeUnit.MILLISECONDS),
                            request);
                    code = Status.Code.OK;
                } catch (StatusRuntimeException e) {
                    code = e.getStatus().getCode();
                    boolean hang = code == Status.Code.DEADLINE_EXCEEDED && !isWait(method);
                    if (code == Status.Code.UNKNOWN || code == Status.Code.INTERNAL || hang) {
                        bad.putIfAbsent(method.getBareMethodName() + " " + code, e.getStatus().getDescription() + " for " + request);
                    }
                }
                codes.merge(code, 1, Integer::sum);
                long took = System.nanoTime() - callStart;
                nanosByMethod.merge(method.getBareMethodName(), took, Long::sum);
                if (took > 1_000_000_000L && slow.size() < 8) {
                    String shown = request.toString().replace('\n', ' ');
                    slow.add(took / 1_000_000 + " ms " + code + " " + method.getBareMethodName() + " "
                            + (shown.length() > 200 ? shown.substring(0, 200) : shown));
                    System.out.println("VerbsFuzzTest slow call " + i + ": " + slow.get(slow.size() - 1));
                }
            }
            System.out.println("VerbsFuzzTest " + INPUTS + " inputs: " + codes);
            System.out.println("VerbsFuzzTest time per method (ms): " + nanosByMethod.entrySet().stream()
                    .map(e -> e.getKey() + "=" + e.getValue() / 1_000_000).toList());
            System.out.println("VerbsFuzzTest calls over 1 s: " + String.join("\n  ", slow));
            assertThat(bad).as("calls that ended in UNKNOWN, INTERNAL or a hang (seed " + seed + ")").isEmpty();
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        wellBehavedClientStillServed();
    }

    @Test
    void everyFuzzedSessionMessageGetsAClearAnswerAndTheNodeKeepsServing() throws Exception {
        long seed = Long.getLong("pagewire.fuzz.seed", System.nanoTime());
        int messages = Integer.getInteger("pagewire.fuzz.sessionMessages", 50_000);
        System.out.println("VerbsFuzzTest session messages, seed " + seed + " (replay with -Dpagewire.fuzz.seed=" + seed + ")");
        SplittableRandom random = new SplittableRandom(seed);
        start(2, c -> { });
        ManagedChannel channel = cluster.openChannel(cluster.node(1));
        Map<String, Integer> outcomes = new TreeMap<>();
        Map<String, String> bad = new TreeMap<>();
        try {
            int sent = 0;
            int streams = 0;
            while (sent < messages) {
                FuzzSession session = FuzzSession.open(channel);
                streams++;
                for (int i = 0; i < 2000 && sent < messages && !session.ended.isDone(); i++) {
                    SessionRequest request = fuzzSessionRequest(random, session.ref);
                    if (!session.send(request)) {
                        bad.putIfAbsent("stopped reading", "the node stopped reading a session whose client reads, after " + request);
                        break;
                    }
                    sent++;
                }
                Status end = session.finish();
                outcomes.merge("stream " + end.getCode(), 1, Integer::sum);
                outcomes.merge("refused posts", (int) session.refused.get(), Integer::sum);
                if (end.getCode() == Status.Code.UNKNOWN || end.getCode() == Status.Code.INTERNAL) {
                    bad.putIfAbsent("stream " + end.getCode(), end.getDescription());
                }
            }
            System.out.println("VerbsFuzzTest " + sent + " session messages on " + streams + " streams: " + outcomes);
            assertThat(bad).as("session streams that ended in UNKNOWN, INTERNAL or stopped being read (seed " + seed + ")").isEmpty();
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        wellBehavedClientStillServed();
    }

    /** One of a session message's kinds (post, post receive, watch, doorbell, rings, a second open), every field fuzzed. */
    private static SessionRequest fuzzSessionRequest(SplittableRandom random, EndpointRef ref) {
        List<FieldDescriptor> kinds = SessionRequest.getDescriptor().getFields();
        // Mostly posts and receives (refused one by one, the stream goes on); the rest end a stream when wrong.
        FieldDescriptor kind = random.nextInt(4) != 0
                ? SessionRequest.getDescriptor().findFieldByName(random.nextBoolean() ? "post" : "post_receive")
                : kinds.get(random.nextInt(kinds.size()));
        SessionRequest.Builder builder = SessionRequest.newBuilder();
        Object value = value(kind, builder, ref, random, 0);
        if (value != null) {
            builder.setField(kind, value);
        }
        return builder.build();
    }

    /** A session on the raw stream whose client reads every event, as a well-behaved one does, and sends what it is given. */
    private static final class FuzzSession {
        final CompletableFuture<Status> ended = new CompletableFuture<>();
        final AtomicLong refused = new AtomicLong();
        private final CompletableFuture<EndpointRef> opened = new CompletableFuture<>();
        private io.grpc.stub.ClientCallStreamObserver<SessionRequest> stream;
        EndpointRef ref;

        static FuzzSession open(ManagedChannel channel) throws Exception {
            FuzzSession session = new FuzzSession();
            VerbsGrpc.newStub(channel).session(new io.grpc.stub.ClientResponseObserver<SessionRequest, SessionEvent>() {
                @Override
                public void beforeStart(io.grpc.stub.ClientCallStreamObserver<SessionRequest> requests) {
                    session.stream = requests;
                }

                @Override
                public void onNext(SessionEvent event) {
                    if (event.hasOpened()) {
                        session.opened.complete(EndpointRef.newBuilder().setEndpointId(event.getOpened().getEndpointId())
                                .setSessionKey(event.getOpened().getSessionKey()).build());
                    } else if (event.hasRefused()) {
                        session.refused.incrementAndGet();
                    }
                }

                @Override
                public void onError(Throwable t) {
                    session.ended.complete(Status.fromThrowable(t));
                    session.opened.completeExceptionally(t);
                }

                @Override
                public void onCompleted() {
                    session.ended.complete(Status.OK);
                }
            });
            session.stream.onNext(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName("session-fuzz")).build());
            session.ref = session.opened.get(10, TimeUnit.SECONDS);
            return session;
        }

        /** False when the stream stayed unready for 10 s although this client reads everything. */
        boolean send(SessionRequest request) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!stream.isReady() && !ended.isDone()) {
                if (System.nanoTime() > deadline) {
                    return false;
                }
                Thread.sleep(1);
            }
            if (!ended.isDone()) {
                stream.onNext(request);
            }
            return true;
        }

        Status finish() throws Exception {
            if (!ended.isDone()) {
                stream.onCompleted();
            }
            return ended.get(30, TimeUnit.SECONDS);
        }
    }

    /** AwaitEventCounter waits as long as it is asked to (a fuzzed timeout may be days): its own deadline is the client's choice. */
    private static boolean isWait(MethodDescriptor<?, ?> method) {
        return method.getBareMethodName().equals("AwaitEventCounter");
    }

    private static long deadlineMs(MethodDescriptor<?, ?> method) {
        return isWait(method) ? 20 : 10_000;
    }

    /** A real session on the raw stream: its endpoint is what most fuzzed calls name. */
    private static EndpointRef openSession(ManagedChannel channel) throws Exception {
        CompletableFuture<EndpointRef> opened = new CompletableFuture<>();
        StreamObserver<SessionRequest> stream = VerbsGrpc.newStub(channel).session(new StreamObserver<SessionEvent>() {
            @Override
            public void onNext(SessionEvent event) {
                if (event.hasOpened()) {
                    opened.complete(EndpointRef.newBuilder().setEndpointId(event.getOpened().getEndpointId())
                            .setSessionKey(event.getOpened().getSessionKey()).build());
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
        stream.onNext(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName("fuzz")).build());
        return opened.get(10, TimeUnit.SECONDS);
    }

    @SuppressWarnings("unchecked")
    private static List<MethodDescriptor<Message, Message>> unaryMethods() {
        List<MethodDescriptor<Message, Message>> unary = new ArrayList<>();
        for (MethodDescriptor<?, ?> method : VerbsGrpc.getServiceDescriptor().getMethods()) {
            if (method.getType() == MethodDescriptor.MethodType.UNARY) {
                unary.add((MethodDescriptor<Message, Message>) method);
            }
        }
        return unary;
    }

    private static Message prototype(MethodDescriptor<Message, Message> method) {
        return (Message) ((MethodDescriptor.PrototypeMarshaller<?>) method.getRequestMarshaller()).getMessagePrototype();
    }

    /** A message of the prototype's type with every field set to a value that breaks programs (or left unset). */
    private static Message fuzz(Message prototype, EndpointRef ref, SplittableRandom random, int depth) {
        if (prototype instanceof EndpointRef && random.nextInt(10) < 8) {
            return random.nextInt(10) == 0 ? ref.toBuilder().setSessionKey(random.nextLong()).build() : ref;
        }
        Message.Builder builder = prototype.newBuilderForType();
        for (FieldDescriptor field : prototype.getDescriptorForType().getFields()) {
            if (random.nextInt(5) == 0) {
                continue;
            }
            int count = field.isRepeated() ? random.nextInt(4) : 1;
            for (int k = 0; k < count; k++) {
                Object value = value(field, builder, ref, random, depth);
                if (value == null) {
                    continue;
                }
                if (field.isRepeated()) {
                    builder.addRepeatedField(field, value);
                } else {
                    builder.setField(field, value);
                }
            }
        }
        return builder.build();
    }

    private static Object value(FieldDescriptor field, Message.Builder builder, EndpointRef ref, SplittableRandom random, int depth) {
        return switch (field.getJavaType()) {
            case INT -> new int[] {0, 1, -1, Integer.MAX_VALUE, Integer.MIN_VALUE, 4096, 8, 7, random.nextInt()}[random.nextInt(9)];
            case LONG -> new long[] {0, 1, -1, Long.MAX_VALUE, Long.MIN_VALUE, 4096, 1L << 40, 0xFFFFFFFFL, -4096, random.nextLong(),
                    random.nextLong(1L << 32)}[random.nextInt(11)];
            case BOOLEAN -> random.nextBoolean();
            case FLOAT -> random.nextInt(2) == 0 ? Float.NaN : (float) random.nextDouble();
            case DOUBLE -> random.nextInt(2) == 0 ? Double.NaN : random.nextDouble();
            case STRING -> new String[] {"", "node-2", "node-1", "x".repeat(100_000), "\u0000\uffff", "node-2/1/32/4096"}[random.nextInt(6)];
            case BYTE_STRING -> ByteString.copyFrom(new byte[new int[] {0, 1, 4096, 100_000}[random.nextInt(4)]]);
            case ENUM -> {
                List<EnumValueDescriptor> values = field.getEnumType().getValues();
                yield random.nextInt(5) == 0 ? field.getEnumType().findValueByNumberCreatingIfUnknown(99)
                        : values.get(random.nextInt(values.size()));
            }
            case MESSAGE -> depth > 3 ? null : fuzz((Message) builder.newBuilderForField(field).getDefaultInstanceForType(), ref, random, depth + 1);
        };
    }

    private void wellBehavedClientStillServed() {
        Pagewire one = connect(cluster.node(1));
        Pagewire two = connect(cluster.node(2));
        Endpoint a = one.openEndpoint("after-fuzz");
        Endpoint b = two.openEndpoint("after-fuzz");
        long src = a.allocate(4096);
        a.store(src, new byte[] {1, 2, 3});
        MemoryRegion from = a.register(src, 4096, RegistrationMode.PINNED, Access.all());
        long dst = b.allocate(4096);
        MemoryRegion to = b.register(dst, 4096, RegistrationMode.ON_DEMAND, Access.all());
        QueuePair qp = a.connect(b);
        qp.await(qp.write(from, src, 3, dst, to.rkey()));
        assertThat(b.load(dst, 3)).containsExactly(1, 2, 3);
        a.close();
        b.close();
    }
}
