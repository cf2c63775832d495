package io.pagewire.node.security;

import io.grpc.ForwardingServerCall;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerMethodDefinition;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.LongAdder;

/**
 * How the node treats input that is not even well formed (a request that does not parse, a frame that
 * breaks its protocol): the caller's fault, answered INVALID_ARGUMENT, counted by where it came in, and
 * logged as one line per caller at most every {@link #QUIET_NS} (saying how many more came meanwhile),
 * never with a stack trace. A caller that sends garbage for days fills a counter, not the log.
 */
public final class BadInput {
    /** Where bad input came in: the meter's {@code source} tag. */
    public enum Source {
        /** A verbs call or session message (gRPC) that does not parse. */
        VERBS,
        /** A frame on the verbs socket that breaks its framing, or whose message does not parse. */
        VERBS_SOCKET,
        /** A lane frame from a peer that does not parse. */
        LANE;

        public String tag() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    /** The least time between two log lines about one caller. */
    static final long QUIET_NS = 10_000_000_000L;
    /** Callers remembered for their last line; past it the memory starts over (a line more, never a heap that grows). */
    private static final int MAX_CALLERS = 1024;
    private static final System.Logger LOG = System.getLogger(BadInput.class.getName());

    private final String nodeId;
    private final EnumMap<Source, LongAdder> counts = new EnumMap<>(Source.class);
    /** Per caller: when its last line was logged, and what came since. */
    private final Map<String, long[]> callers = new HashMap<>();

    public BadInput(String nodeId) {
        this.nodeId = nodeId;
        for (Source source : Source.values()) {
            counts.put(source, new LongAdder());
        }
    }

    /** Bad input from {@code caller}: counted, and logged unless this caller was logged less than {@link #QUIET_NS} ago. */
    public void report(Source source, String caller, String what) {
        counts.get(source).increment();
        String who = caller == null ? "unknown" : caller;
        long now = System.nanoTime();
        long since;
        synchronized (callers) {
            long[] last = callers.get(who);
            if (last != null && now - last[0] < QUIET_NS) {
                last[1]++;
                return;
            }
            if (last == null && callers.size() >= MAX_CALLERS) {
                callers.clear();
            }
            since = last == null ? 0 : last[1];
            callers.put(who, new long[] {now, 0});
        }
        LOG.log(System.Logger.Level.WARNING, "node " + nodeId + ": bad input from " + who + " (" + source.tag() + "): " + what
                + (since == 0 ? "" : "; " + since + " more from it since its last line") + " (pagewire_bad_input_total counts them all)");
    }

    /** Bad inputs from {@code source} so far. */
    public long count(Source source) {
        return counts.get(source).sum();
    }

    /**
     * The service with every method's request parsed tolerantly: a request (or session message) that
     * does not parse ends its call with INVALID_ARGUMENT and is reported here, where gRPC would end it
     * UNKNOWN and log its stack trace at SEVERE.
     */
    public ServerServiceDefinition guard(ServerServiceDefinition service, Source source) {
        ServiceDescriptor original = service.getServiceDescriptor();
        List<ServerMethodDefinition<?, ?>> guarded = new ArrayList<>();
        for (ServerMethodDefinition<?, ?> method : service.getMethods()) {
            guarded.add(guard(method, source));
        }
        ServiceDescriptor.Builder descriptor = ServiceDescriptor.newBuilder(original.getName()).setSchemaDescriptor(original.getSchemaDescriptor());
        guarded.forEach(m -> descriptor.addMethod(m.getMethodDescriptor()));
        ServerServiceDefinition.Builder builder = ServerServiceDefinition.builder(descriptor.build());
        guarded.forEach(builder::addMethod);
        return builder.build();
    }

    /** What a request that did not parse becomes, in place of the message. */
    private record Unparsable(String reason) {
    }

    private <Q, R> ServerMethodDefinition<Object, R> guard(ServerMethodDefinition<Q, R> definition, Source source) {
        MethodDescriptor<Q, R> method = definition.getMethodDescriptor();
        MethodDescriptor.Marshaller<Q> parser = method.getRequestMarshaller();
        MethodDescriptor.Marshaller<Object> tolerant = new MethodDescriptor.Marshaller<>() {
            @Override
            @SuppressWarnings("unchecked")
            public InputStream stream(Object value) {
                return parser.stream((Q) value);
            }

            @Override
            public Object parse(InputStream stream) {
                try {
                    return parser.parse(stream);
                } catch (RuntimeException e) {
                    Throwable cause = e.getCause() != null ? e.getCause() : e;
                    return new Unparsable(cause.getMessage() == null ? cause.getClass().getSimpleName() : cause.getMessage());
                }
            }
        };
        ServerCallHandler<Object, R> handler = (call, headers) -> {
            GuardedCall<Q, R> inner = new GuardedCall<>(call, method);
            ServerCall.Listener<Q> delegate = definition.getServerCallHandler().startCall(inner.asCallOf(), headers);
            return new ServerCall.Listener<>() {
                @Override
                @SuppressWarnings("unchecked")
                public void onMessage(Object message) {
                    if (inner.refused) {
                        return;
                    }
                    if (message instanceof Unparsable unparsable) {
                        String what = method.getBareMethodName() + " request does not parse: " + unparsable.reason();
                        report(source, CallerAuthentication.CALLER.get(), what);
                        inner.refused = true;
                        delegate.onCancel(); // what the handler started (a session) ends as when its caller goes
                        call.close(Status.INVALID_ARGUMENT.withDescription("the " + what), new Metadata());
                        return;
                    }
                    delegate.onMessage((Q) message);
                }

                @Override
                public void onHalfClose() {
                    if (!inner.refused) {
                        delegate.onHalfClose();
                    }
                }

                @Override
                public void onCancel() {
                    if (!inner.refused) {
                        delegate.onCancel();
                    }
                }

                @Override
                public void onComplete() {
                    if (!inner.refused) {
                        delegate.onComplete();
                    }
                }

                @Override
                public void onReady() {
                    if (!inner.refused) {
                        delegate.onReady();
                    }
                }
            };
        };
        return ServerMethodDefinition.create(method.toBuilder(tolerant, method.getResponseMarshaller()).build(), handler);
    }

    /** The call as the service's own handler sees it: its own method, and nothing it sends once the call was refused. */
    private static final class GuardedCall<Q, R> extends ForwardingServerCall.SimpleForwardingServerCall<Object, R> {
        private final MethodDescriptor<Q, R> method;
        private volatile boolean refused;

        GuardedCall(ServerCall<Object, R> call, MethodDescriptor<Q, R> method) {
            super(call);
            this.method = method;
        }

        @Override
        @SuppressWarnings("unchecked")
        public MethodDescriptor<Object, R> getMethodDescriptor() {
            return (MethodDescriptor<Object, R>) (MethodDescriptor<?, R>) method;
        }

        /** This call typed as the service's handler takes it (it only ever asks for messages, and sends responses). */
        @SuppressWarnings("unchecked")
        ServerCall<Q, R> asCallOf() {
            return (ServerCall<Q, R>) (ServerCall<?, R>) this;
        }

        @Override
        public void sendHeaders(Metadata headers) {
            if (!refused) {
                super.sendHeaders(headers);
            }
        }

        @Override
        public void sendMessage(R message) {
            if (!refused) {
                super.sendMessage(message);
            }
        }

        @Override
        public void close(Status status, Metadata trailers) {
            if (!refused) {
                super.close(status, trailers);
            }
        }
    }
}
