package io.pagewire.node.security;

import io.grpc.Context;
import io.grpc.Contexts;
import io.grpc.Grpc;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.LongAdder;
import javax.net.ssl.SSLPeerUnverifiedException;
import javax.net.ssl.SSLSession;

/**
 * Decides, before any service sees a call, who is calling: with mutual TLS the caller's
 * certificate must name a Pagewire node or application ({@link PeerIdentity}, made current for the
 * call), and with an application token the guarded services (verbs, reflection) need it in the
 * {@code authorization} header. Health stays answerable to any caller that passed the TLS handshake,
 * so probes need no token. Each refusal is counted by reason.
 */
public final class CallerAuthentication implements ServerInterceptor {
    /** The header an application's token travels in, as {@code Bearer TOKEN}. */
    public static final Metadata.Key<String> AUTHORIZATION = Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

    /**
     * Who is calling, for per-client limits: the certificate's identity with mutual TLS, else the
     * caller's host (plaintext). Set for every call that passes.
     */
    public static final Context.Key<String> CALLER = Context.key("pagewire-caller");

    private final boolean mutualTls;
    private final byte[] token;
    private final Set<String> guardedServices;
    private final LongAdder noIdentity = new LongAdder();
    private final LongAdder badToken = new LongAdder();

    /**
     * @param guardedServices the services that need the application token (when there is one)
     */
    public CallerAuthentication(SecurityContext security, Set<String> guardedServices) {
        this.mutualTls = security.mutualTls();
        this.token = security.applicationToken().getBytes(StandardCharsets.US_ASCII);
        this.guardedServices = Set.copyOf(guardedServices);
    }

    @Override
    public <ReqT, RespT> ServerCall.Listener<ReqT> interceptCall(ServerCall<ReqT, RespT> call, Metadata headers,
            ServerCallHandler<ReqT, RespT> next) {
        PeerIdentity identity = null;
        if (mutualTls) {
            identity = identityOf(call).orElse(null);
            if (identity == null) {
                noIdentity.increment();
                return refuse(call, Status.UNAUTHENTICATED.withDescription(
                        "the caller's certificate names no Pagewire node or application (a URI pagewire://node/ID or pagewire://app/NAME)"));
            }
        }
        if (token.length > 0 && guardedServices.contains(call.getMethodDescriptor().getServiceName())) {
            String sent = headers.get(AUTHORIZATION);
            if (sent == null || !sent.startsWith("Bearer ")) {
                badToken.increment();
                return refuse(call, Status.UNAUTHENTICATED.withDescription(
                        "this node needs an application token (header authorization: Bearer TOKEN; the SDK sends ConnectOptions' token)"));
            }
            byte[] given = sent.substring("Bearer ".length()).getBytes(StandardCharsets.US_ASCII);
            if (!MessageDigest.isEqual(given, token)) {
                badToken.increment();
                return refuse(call, Status.UNAUTHENTICATED.withDescription("the application token sent is not this node's"));
            }
        }
        Context context = Context.current().withValue(CALLER, identity != null ? identity.toString() : "host " + hostOf(call));
        if (identity != null) {
            context = context.withValue(PeerIdentity.CURRENT, identity);
        }
        return Contexts.interceptCall(context, call, headers, next);
    }

    private static String hostOf(ServerCall<?, ?> call) {
        SocketAddress remote = call.getAttributes().get(Grpc.TRANSPORT_ATTR_REMOTE_ADDR);
        if (remote instanceof InetSocketAddress inet) {
            return inet.getAddress() == null ? inet.getHostString() : inet.getAddress().getHostAddress();
        }
        return String.valueOf(remote);
    }

    private static Optional<PeerIdentity> identityOf(ServerCall<?, ?> call) {
        SSLSession session = call.getAttributes().get(Grpc.TRANSPORT_ATTR_SSL_SESSION);
        if (session == null) {
            return Optional.empty();
        }
        try {
            return PeerIdentity.of(session.getPeerCertificates());
        } catch (SSLPeerUnverifiedException e) {
            return Optional.empty();
        }
    }

    private static <ReqT, RespT> ServerCall.Listener<ReqT> refuse(ServerCall<ReqT, RespT> call, Status status) {
        call.close(status, new Metadata());
        return new ServerCall.Listener<>() {
        };
    }

    /** Calls refused because the caller's certificate named no Pagewire identity. */
    public long refusedForIdentity() {
        return noIdentity.sum();
    }

    /** Calls refused for a missing or wrong application token. */
    public long refusedForToken() {
        return badToken.sum();
    }
}
