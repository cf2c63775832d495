package io.pagewire.node.verbs;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.KnownLength;
import io.grpc.ClientCall;
import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Server;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.ServerInterceptors;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.inprocess.InProcessChannelBuilder;
import io.grpc.inprocess.InProcessServerBuilder;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.security.BadInput;
import io.pagewire.node.security.CallerAuthentication;
import io.pagewire.proto.verbs.VerbsGrpc;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executor;

/**
 * The node's verbs on a Unix-domain socket, for programs on its host that speak no gRPC (the C verbs
 * library), as rdma-core's providers reach their device through {@code /dev/infiniband/uverbsN}: each
 * frame carries one message of the {@code Verbs} service, which the socket passes to the very same
 * service (through a private in-process channel), so every check, quota and pacer applies. The socket
 * is made in the node's own directory in its ring directory, readable and writable by the node's user
 * only: whoever can connect can map the node's memory anyway.
 *
 * <pre>
 *   frame (both ways; little-endian):
 *   0                   4        5
 *   +-------------------+--------+---------------------------------------------+
 *   | length (kind+body)| kind   | body                                        |
 *   +-------------------+--------+---------------------------------------------+
 *
 *   program to node:
 *     CALL (1):          u16 method name length, method name ("RegisterRegion"), request message
 *     OPEN_SESSION (2):  (empty) this connection becomes a Session stream; or u16 method name length,
 *                        method name ("CmChannel"): it becomes that bidirectional stream
 *     SESSION_SEND (3):  a SessionRequest (or the opened stream's request message)
 *   node to program:
 *     REPLY (1):         u32 gRPC status code; then the response message (code 0) or the error text
 *     SESSION_EVENT (3): a SessionEvent (or the opened stream's response message)
 *     SESSION_END (4):   u32 gRPC status code, the error text (the stream ended; the connection closes)
 * </pre>
 *
 * A connection carries one call at a time, or, once opened, one session; closing it ends the session
 * (its endpoint closes, as when an application's stream breaks).
 */
public final class VerbsSocket implements AutoCloseable {
    public static final int CALL = 1;
    public static final int OPEN_SESSION = 2;
    public static final int SESSION_SEND = 3;
    public static final int REPLY = 1;
    public static final int SESSION_EVENT = 3;
    public static final int SESSION_END = 4;
    /** Largest frame either side accepts (a SessionRequest of many posts, a registration's frames). */
    static final int MAX_FRAME = 64 << 20;

    private static final System.Logger LOG = System.getLogger(VerbsSocket.class.getName());
    private static final Metadata.Key<String> LOCAL_CALLER = Metadata.Key.of("pagewire-local-caller", Metadata.ASCII_STRING_MARSHALLER);
    private static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new KnownLengthBytes(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };

    private final Path path;
    private final BadInput badInput;
    private final List<Path> links;
    private final ServerSocketChannel listener;
    private final Server server;
    private final ManagedChannel inProcess;
    private final Channel channel;
    private final Map<String, MethodDescriptor<byte[], byte[]>> methods = new HashMap<>();
    private final Set<SocketChannel> connections = ConcurrentHashMap.newKeySet();
    private final Thread acceptor;
    private volatile boolean closed;

    private VerbsSocket(Path path, ServerSocketChannel listener, VerbsService verbs, Executor work, List<Path> links, BadInput badInput)
            throws IOException {
        this.path = path;
        this.badInput = badInput;
        this.links = List.copyOf(links);
        this.listener = listener;
        String name = "pagewire-verbs-socket-" + UUID.randomUUID();
        this.server = InProcessServerBuilder.forName(name).executor(work)
                .addService(ServerInterceptors.intercept(badInput.guard(verbs.bindService(), BadInput.Source.VERBS_SOCKET), new LocalCaller()))
                .build().start();
        this.inProcess = InProcessChannelBuilder.forName(name).directExecutor().build();
        this.channel = ClientInterceptors.intercept(inProcess, new ClientInterceptor() {
            @Override
            public <Q, R> ClientCall<Q, R> interceptCall(MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
                return new ForwardingClientCall.SimpleForwardingClientCall<>(next.newCall(method, options)) {
                    @Override
                    public void start(Listener<R> listener, Metadata headers) {
                        headers.put(LOCAL_CALLER, String.valueOf(options.getOption(CALLER_OPTION)));
                        super.start(listener, headers);
                    }
                };
            }
        });
        for (MethodDescriptor<?, ?> m : VerbsGrpc.getServiceDescriptor().getMethods()) {
            methods.put(m.getBareMethodName(), m.toBuilder(BYTES, BYTES).build());
        }
        this.acceptor = new Thread(this::acceptLoop, "pagewire-verbs-socket");
        acceptor.setDaemon(true);
        acceptor.start();
    }

    /**
     * Listens at {@code path}, in the node's own directory (see {@code OwnerDirectory}); null, with the
     * reason logged, when the directory cannot hold one.
     *
     * @param links other names linked to the socket, by which programs name the node (its port, its id);
     *     when nodes sharing a directory share one (containers share a port, clusters node ids), the
     *     latest node has it
     */
    public static VerbsSocket start(Path path, VerbsService verbs, Executor work, List<Path> links, BadInput badInput) {
        try {
            Files.deleteIfExists(path);
            ServerSocketChannel listener = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            try {
                listener.bind(UnixDomainSocketAddress.of(path));
                Files.setPosixFilePermissions(path, PosixFilePermissions.fromString("rw-------"));
                for (Path link : links) {
                    Files.deleteIfExists(link);
                    Files.createSymbolicLink(link, link.getParent().relativize(path));
                }
                return new VerbsSocket(path, listener, verbs, work, links, badInput);
            } catch (IOException | RuntimeException e) {
                listener.close();
                Files.deleteIfExists(path);
                throw e;
            }
        } catch (IOException | RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "no verbs socket at " + path + " (C verbs programs cannot reach this node): " + e.getMessage());
            return null;
        }
    }

    private void acceptLoop() {
        while (!closed) {
            try {
                SocketChannel connection = listener.accept();
                connections.add(connection);
                Thread t = new Thread(() -> serve(connection), "pagewire-verbs-socket-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                if (!closed) {
                    LOG.log(System.Logger.Level.WARNING, "verbs socket " + path + " stopped accepting: " + e.getMessage());
                }
                return;
            }
        }
    }

    /** Serves one connection: calls one after another, until it opens a session or closes. */
    private void serve(SocketChannel connection) {
        String caller = "local " + callerOf(connection);
        try (connection) {
            Frames frames = new Frames(connection);
            while (true) {
                ByteBuffer frame = frames.read();
                if (frame == null) {
                    return;
                }
                int kind = frame.get() & 0xFF;
                if (kind == CALL) {
                    call(frames, frame, caller);
                } else if (kind == OPEN_SESSION) {
                    MethodDescriptor<byte[], byte[]> stream = streamNamed(frames, frame, caller);
                    if (stream != null) {
                        session(frames, caller, stream);
                    }
                    return;
                } else {
                    refuse(frames, caller, Status.Code.INVALID_ARGUMENT, "frame kind " + kind + " is not CALL (1) or OPEN_SESSION (2)");
                }
            }
        } catch (MalformedFrameException e) {
            badInput.report(BadInput.Source.VERBS_SOCKET, caller, e.getMessage() + "; the connection was closed");
        } catch (IOException | RuntimeException e) {
            LOG.log(System.Logger.Level.DEBUG, "verbs socket connection ended: " + e);
        } finally {
            connections.remove(connection);
        }
    }

    private void call(Frames frames, ByteBuffer frame, String caller) throws IOException {
        if (frame.remaining() < 2) {
            refuse(frames, caller, Status.Code.INVALID_ARGUMENT, "a CALL frame starts with its method name's length");
            return;
        }
        int nameLength = frame.getShort() & 0xFFFF;
        if (nameLength > frame.remaining()) {
            refuse(frames, caller, Status.Code.INVALID_ARGUMENT, "a CALL frame's method name runs past the frame");
            return;
        }
        byte[] name = new byte[nameLength];
        frame.get(name);
        MethodDescriptor<byte[], byte[]> method = methods.get(new String(name, StandardCharsets.UTF_8));
        if (method == null || method.getType() != MethodDescriptor.MethodType.UNARY) {
            String shown = new String(name, StandardCharsets.UTF_8);
            refuse(frames, caller, Status.Code.UNIMPLEMENTED, "no unary verbs call named " + (shown.length() > 64 ? shown.substring(0, 64) + "..." : shown));
            return;
        }
        byte[] request = new byte[frame.remaining()];
        frame.get(request);
        try {
            byte[] response = ClientCalls.blockingUnaryCall(channel.newCall(method, CallOptions.DEFAULT.withOption(CALLER_OPTION, caller)), request);
            frames.reply(0, response);
        } catch (StatusRuntimeException e) {
            frames.reply(e.getStatus().getCode().value(), String.valueOf(e.getStatus().getDescription()));
        }
    }

    /**
     * The stream an OPEN_SESSION frame names: Session when it names none, else the bidirectional
     * method it names; null (the caller told why) when there is no such stream.
     */
    private MethodDescriptor<byte[], byte[]> streamNamed(Frames frames, ByteBuffer frame, String caller) throws IOException {
        if (!frame.hasRemaining()) {
            return methods.get("Session");
        }
        if (frame.remaining() < 2 || (frame.getShort(frame.position()) & 0xFFFF) > frame.remaining() - 2) {
            refuse(frames, caller, Status.Code.INVALID_ARGUMENT, "an OPEN_SESSION frame is empty or carries a stream's name after its length");
            return null;
        }
        byte[] name = new byte[frame.getShort() & 0xFFFF];
        frame.get(name);
        String shown = new String(name, StandardCharsets.UTF_8);
        MethodDescriptor<byte[], byte[]> method = methods.get(shown);
        if (method == null || method.getType() != MethodDescriptor.MethodType.BIDI_STREAMING) {
            refuse(frames, caller, Status.Code.UNIMPLEMENTED, "no verbs stream named " + (shown.length() > 64 ? shown.substring(0, 64) + "..." : shown));
            return null;
        }
        return method;
    }

    /** The connection becomes a stream of {@code method}: frames in are its requests, its responses go out. */
    private void session(Frames frames, String caller, MethodDescriptor<byte[], byte[]> method) throws IOException {
        ClientCall<byte[], byte[]> call = channel.newCall(method, CallOptions.DEFAULT.withOption(CALLER_OPTION, caller));
        StreamObserver<byte[]> requests = ClientCalls.asyncBidiStreamingCall(call, new StreamObserver<>() {
            @Override
            public void onNext(byte[] event) {
                frames.sendQuietly(SESSION_EVENT, event);
            }

            @Override
            public void onError(Throwable t) {
                Status s = Status.fromThrowable(t);
                frames.endQuietly(s.getCode().value(), String.valueOf(s.getDescription()));
            }

            @Override
            public void onCompleted() {
                frames.endQuietly(0, "");
            }
        });
        try {
            while (true) {
                ByteBuffer frame = frames.read();
                if (frame == null) {
                    break;
                }
                int kind = frame.get() & 0xFF;
                if (kind != SESSION_SEND) {
                    String what = "frame kind " + kind + " on a session: only SESSION_SEND (3)";
                    badInput.report(BadInput.Source.VERBS_SOCKET, caller, what);
                    requests.onError(Status.INVALID_ARGUMENT.withDescription(what).asRuntimeException());
                    return;
                }
                byte[] message = new byte[frame.remaining()];
                frame.get(message);
                requests.onNext(message);
            }
            requests.onCompleted();
        } catch (IOException | RuntimeException e) {
            // The program went away (or wrote garbage): its session ends, as a broken stream's does.
            requests.onError(Status.CANCELLED.withDescription("the program's verbs socket closed").asRuntimeException());
        }
    }

    /** Answers a frame that breaks the protocol with {@code code}, and reports it as the caller's bad input. */
    private void refuse(Frames frames, String caller, Status.Code code, String what) throws IOException {
        badInput.report(BadInput.Source.VERBS_SOCKET, caller, what);
        frames.reply(code.value(), what);
    }

    /**
     * A message's bytes as the in-process transport hands them to the service's parser: a stream of known
     * length, which protobuf's marshaller parses from one reused array instead of through a stream decoder
     * with a 4 KiB buffer of its own per message.
     */
    private static final class KnownLengthBytes extends ByteArrayInputStream implements KnownLength {
        KnownLengthBytes(byte[] bytes) {
            super(bytes);
        }
    }

    private static final CallOptions.Key<String> CALLER_OPTION = CallOptions.Key.create("pagewire-local-caller");

    /** Puts the connection's caller (its user, from the socket's peer credentials) where the service looks for it. */
    private static final class LocalCaller implements ServerInterceptor {
        @Override
        public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(ServerCall<ReqT, RespT> call, Metadata headers,
                ServerCallHandler<ReqT, RespT> next) {
            String caller = headers.get(LOCAL_CALLER);
            Context context = Context.current().withValue(CallerAuthentication.CALLER, caller == null ? "local" : caller);
            return Contexts.interceptCall(context, call, headers, next);
        }
    }

    private static String callerOf(SocketChannel connection) {
        try {
            return "user " + connection.getOption(jdk.net.ExtendedSocketOptions.SO_PEERCRED).user().getName();
        } catch (IOException | RuntimeException e) {
            return "user ?";
        }
    }

    @Override
    public void close() {
        closed = true;
        try {
            listener.close();
        } catch (IOException e) {
            // Closing a listener that failed already.
        }
        for (SocketChannel c : connections) {
            try {
                c.close();
            } catch (IOException e) {
                // Gone already.
            }
        }
        inProcess.shutdownNow();
        server.shutdownNow();
        try {
            Files.deleteIfExists(path);
            for (Path link : links) {
                if (Files.isSymbolicLink(link) && Files.readSymbolicLink(link).equals(link.getParent().relativize(path))) {
                    Files.delete(link);
                }
            }
        } catch (IOException e) {
            // A leftover socket is replaced by the next node of this id or port.
        }
    }

    /** A frame whose length breaks the protocol: the connection cannot be read on. */
    private static final class MalformedFrameException extends IOException {
        private static final long serialVersionUID = 1L;

        MalformedFrameException(String message) {
            super(message);
        }
    }

    /** Reads and writes the frames of one connection (writes serialised: session events come from the node's threads). */
    private static final class Frames {
        private final SocketChannel channel;
        private final ByteBuffer length = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
        private boolean ended;

        Frames(SocketChannel channel) {
            this.channel = channel;
        }

        /** The next frame (positioned at its kind), or null at the end of the stream. */
        ByteBuffer read() throws IOException {
            length.clear();
            if (!fill(length)) {
                return null;
            }
            int n = length.flip().getInt();
            if (n < 1 || n > MAX_FRAME) {
                throw new MalformedFrameException("a frame of " + Integer.toUnsignedString(n) + " bytes (1.." + MAX_FRAME + ")");
            }
            ByteBuffer frame = ByteBuffer.allocate(n).order(ByteOrder.LITTLE_ENDIAN);
            if (!fill(frame)) {
                throw new IOException("the connection closed inside a frame");
            }
            return frame.flip();
        }

        private boolean fill(ByteBuffer b) throws IOException {
            while (b.hasRemaining()) {
                if (channel.read(b) < 0) {
                    if (b.position() == 0) {
                        return false;
                    }
                    throw new IOException("the connection closed inside a frame");
                }
            }
            return true;
        }

        void reply(int code, byte[] body) throws IOException {
            send(REPLY, code, body);
        }

        void reply(int code, String text) throws IOException {
            send(REPLY, code, text.getBytes(StandardCharsets.UTF_8));
        }

        synchronized void sendQuietly(int kind, byte[] body) {
            try {
                if (!ended) {
                    write(kind, null, body);
                }
            } catch (IOException e) {
                ended = true;
            }
        }

        synchronized void endQuietly(int code, String text) {
            try {
                if (!ended) {
                    write(SESSION_END, code, text.getBytes(StandardCharsets.UTF_8));
                }
                ended = true;
                channel.close();
            } catch (IOException e) {
                ended = true;
            }
        }

        private synchronized void send(int kind, int code, byte[] body) throws IOException {
            write(kind, code, body);
        }

        private void write(int kind, Integer code, byte[] body) throws IOException {
            int n = 1 + (code == null ? 0 : 4) + body.length;
            ByteBuffer out = ByteBuffer.allocate(4 + n).order(ByteOrder.LITTLE_ENDIAN);
            out.putInt(n).put((byte) kind);
            if (code != null) {
                out.putInt(code);
            }
            out.put(body).flip();
            while (out.hasRemaining()) {
                channel.write(out);
            }
        }
    }
}
