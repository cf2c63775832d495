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
import io.pagewire.systemtests.ClusterChecks;
import io.pagewire.systemtests.LogLines;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
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
        try (LogLines log = new LogLines()) {
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
            assertThat(log.withStackTraces()).as("stack traces logged").isEmpty();
            assertThat(log.count()).as("log lines for %d fuzzed calls:\n%s", INPUTS, log.sample())
                    .isLessThanOrEqualTo(LOG_LINES_PER_10K * INPUTS / 10_000);
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
        try (LogLines log = new LogLines()) {
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
            assertThat(log.withStackTraces()).as("stack traces logged").isEmpty();
            assertThat(log.count()).as("log lines for %d fuzzed session messages:\n%s", messages, log.sample())
                    .isLessThanOrEqualTo(LOG_LINES_PER_10K * messages / 10_000);
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

    /** At most this many log lines per 10,000 bad inputs: one per caller every 10 s, and a few from what ends a stream. */
    private static final int LOG_LINES_PER_10K = 20;

    /**
     * Requests that do not parse, on every verbs RPC over gRPC and as frames on the node's verbs socket
     * (broken framing, unknown kinds and calls, calls and session messages whose bytes are not the
     * message): each is INVALID_ARGUMENT (UNIMPLEMENTED for a call that does not exist), the node logs
     * them as a few lines and no stack trace, counts every one, and serves a well-behaved client after.
     */
    @Test
    void unparsableInputIsTheCallersAndTheLogStaysReadable() throws Exception {
        long seed = Long.getLong("pagewire.fuzz.seed", System.nanoTime());
        int inputs = Integer.getInteger("pagewire.fuzz.unparsable", 10_000);
        System.out.println("VerbsFuzzTest unparsable input, seed " + seed + " (replay with -Dpagewire.fuzz.seed=" + seed + ")");
        SplittableRandom random = new SplittableRandom(seed);
        start(2, c -> { });
        PagewireNode node = cluster.node(1);
        Map<String, Integer> grpcCodes = new TreeMap<>();
        Map<String, Integer> socketCodes = new TreeMap<>();
        ManagedChannel channel = cluster.openChannel(node);
        try (LogLines log = new LogLines()) {
            List<MethodDescriptor<byte[], byte[]>> methods = new ArrayList<>();
            for (MethodDescriptor<?, ?> m : VerbsGrpc.getServiceDescriptor().getMethods()) {
                methods.add(m.toBuilder(RAW, RAW).build());
            }
            for (int i = 0; i < inputs; i++) {
                MethodDescriptor<byte[], byte[]> method = methods.get(random.nextInt(methods.size()));
                byte[] garbage = unparsable(random);
                Status.Code code;
                if (method.getType() == MethodDescriptor.MethodType.UNARY) {
                    try {
                        ClientCalls.blockingUnaryCall(channel, method, CallOptions.DEFAULT.withDeadlineAfter(10, TimeUnit.SECONDS), garbage);
                        code = Status.Code.OK;
                    } catch (StatusRuntimeException e) {
                        code = e.getStatus().getCode();
                    }
                } else {
                    code = garbageOnSession(channel, method, garbage);
                }
                grpcCodes.merge(method.getBareMethodName() + " " + code, 1, Integer::sum);
            }
            int grpcLines = log.count();
            System.out.println("VerbsFuzzTest " + inputs + " unparsable gRPC requests: " + grpcCodes + "; " + grpcLines + " log lines");
            assertThat(grpcCodes.keySet()).as("every unparsable request is INVALID_ARGUMENT").allMatch(k -> k.endsWith(" INVALID_ARGUMENT"));

            Path socket = node.context().verbs().ringDirectory().resolve("pagewire-" + node.target().substring(node.target().lastIndexOf(':') + 1)
                    + ".verbs");
            for (int i = 0; i < inputs; i++) {
                socketCodes.merge(garbageOnSocket(socket, random, methods), 1, Integer::sum);
            }
            System.out.println("VerbsFuzzTest " + inputs + " bad frames on " + socket + ": " + socketCodes + "; " + (log.count() - grpcLines)
                    + " log lines");
            assertThat(socketCodes.keySet()).as("every bad frame is refused as the caller's")
                    .allMatch(k -> k.equals("INVALID_ARGUMENT") || k.equals("UNIMPLEMENTED") || k.equals("closed"));
            assertThat(log.withStackTraces()).as("stack traces logged").isEmpty();
            assertThat(log.count()).as("log lines for %d bad inputs:\n%s", 2 * inputs, log.sample())
                    .isLessThanOrEqualTo(LOG_LINES_PER_10K * 2 * inputs / 10_000);
            assertThat(ClusterChecks.total(connect(node), "pagewire_bad_input_total")).as("every bad input counted")
                    .isGreaterThanOrEqualTo(2.0 * inputs);
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        wellBehavedClientStillServed();
    }

    private static final MethodDescriptor.Marshaller<byte[]> RAW = new MethodDescriptor.Marshaller<>() {
        @Override
        public java.io.InputStream stream(byte[] value) {
            return new java.io.ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(java.io.InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (java.io.IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
        }
    };

    /** Bytes no protobuf message parses: a field number 0, a wire type 6 or 7, or a length past the end. */
    private static byte[] unparsable(SplittableRandom random) {
        if (random.nextInt(3) == 0) {
            return new byte[] {0x0A, (byte) 0x7F}; // field 1, length-delimited, 127 bytes that are not there
        }
        byte[] bytes = new byte[1 + random.nextInt(16)];
        random.nextBytes(bytes);
        bytes[0] = random.nextBoolean() ? 0x00 : (byte) 0x0E; // tag 0, or field 1 with wire type 6: neither exists
        return bytes;
    }

    /** Opens a session stream, sends one message that does not parse: how the stream ended. */
    private static Status.Code garbageOnSession(ManagedChannel channel, MethodDescriptor<byte[], byte[]> method, byte[] garbage) throws Exception {
        CompletableFuture<Status> ended = new CompletableFuture<>();
        StreamObserver<byte[]> requests = ClientCalls.asyncBidiStreamingCall(channel.newCall(method, CallOptions.DEFAULT
                .withDeadlineAfter(10, TimeUnit.SECONDS)), new StreamObserver<>() {
                    @Override
                    public void onNext(byte[] value) {
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
        requests.onNext(garbage);
        requests.onCompleted();
        return ended.get(15, TimeUnit.SECONDS).getCode();
    }

    /** One connection to the verbs socket with one bad frame: the status it was answered with, or "closed". */
    private static String garbageOnSocket(Path socket, SplittableRandom random, List<MethodDescriptor<byte[], byte[]>> methods) throws Exception {
        try (SocketChannel channel = SocketChannel.open(UnixDomainSocketAddress.of(socket))) {
            ByteBuffer frame;
            switch (random.nextInt(6)) {
                case 0 -> frame = frame(1 + random.nextInt(200) + 5, new byte[0]); // a kind past 4
                case 1 -> frame = frame(1, new byte[] {(byte) 0xFF}); // a CALL too short for its name's length
                case 2 -> frame = frame(1, callBody("NoSuchCall".repeat(1 + random.nextInt(3)), new byte[0]));
                case 3 -> frame = frame(1, callBody(methods.get(random.nextInt(methods.size())).getBareMethodName(), unparsable(random)));
                case 4 -> {
                    write(channel, frame(2, new byte[0])); // OPEN_SESSION, then a message that does not parse
                    frame = frame(3, unparsable(random));
                }
                default -> {
                    ByteBuffer huge = ByteBuffer.allocate(5).order(ByteOrder.LITTLE_ENDIAN);
                    huge.putInt(-1 - random.nextInt(1000)).put((byte) 1).flip(); // a length past the largest frame
                    frame = huge;
                }
            }
            write(channel, frame);
            ByteBuffer header = ByteBuffer.allocate(9).order(ByteOrder.LITTLE_ENDIAN);
            try {
                while (header.hasRemaining()) {
                    if (channel.read(header) < 0) {
                        return "closed";
                    }
                }
            } catch (java.io.IOException reset) {
                return "closed"; // the node closed a connection whose framing it could not follow
            }
            header.flip();
            header.getInt();
            header.get();
            int code = header.getInt();
            return Status.fromCodeValue(code).getCode().name();
        }
    }

    private static byte[] callBody(String method, byte[] request) {
        byte[] name = method.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        ByteBuffer body = ByteBuffer.allocate(2 + name.length + request.length).order(ByteOrder.LITTLE_ENDIAN);
        body.putShort((short) name.length).put(name).put(request);
        return body.array();
    }

    private static ByteBuffer frame(int kind, byte[] body) {
        ByteBuffer frame = ByteBuffer.allocate(5 + body.length).order(ByteOrder.LITTLE_ENDIAN);
        frame.putInt(1 + body.length).put((byte) kind).put(body).flip();
        return frame;
    }

    private static void write(SocketChannel channel, ByteBuffer frame) throws java.io.IOException {
        while (frame.hasRemaining()) {
            channel.write(frame);
        }
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
