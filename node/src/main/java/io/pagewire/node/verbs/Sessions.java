package io.pagewire.node.verbs;

import io.grpc.Status;
import io.pagewire.kernel.KernelConfiguration;
import io.pagewire.proto.verbs.EndpointRef;
import java.security.SecureRandom;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The application sessions a node serves, by endpoint id: how a call names its session (the endpoint
 * and the key its SessionOpened carried), and the limit on how many there are, node-wide and per
 * caller, so that one application holding sessions cannot lock others out.
 */
final class Sessions {
    private static final Logger LOG = Logger.getLogger(Sessions.class.getName());

    private final String nodeId;
    private final VerbsContext context;
    private final Map<Integer, Session> open = new ConcurrentHashMap<>();
    private final Map<String, Integer> byCaller = new ConcurrentHashMap<>();
    private final SecureRandom keys = new SecureRandom();
    private final int perCaller;

    /** @param callerShare the most of the node's sessions one caller may hold ({@code pagewire.quota.callerShare}) */
    Sessions(String nodeId, VerbsContext context, double callerShare) {
        this.nodeId = nodeId;
        this.context = context;
        this.perCaller = Math.max(1, (int) (context.sessionsLimit() * callerShare));
    }

    /**
     * Admits one more session of {@code caller}, or refuses it (RESOURCE_EXHAUSTED, naming the limit)
     * when the node serves its limit or the caller holds its share; {@link #release} gives it back.
     */
    synchronized void admit(String caller) {
        int held = byCaller.getOrDefault(caller, 0);
        if (open.size() + admitting >= context.sessionsLimit()) {
            throw Status.RESOURCE_EXHAUSTED.withDescription("node " + nodeId + " serves " + open.size()
                    + " sessions, its limit (" + VerbsConfiguration.SESSIONS.name() + ")").asRuntimeException();
        }
        if (held >= perCaller) {
            throw Status.RESOURCE_EXHAUSTED.withDescription("node " + nodeId + " serves " + held + " sessions of " + caller
                    + ", its share of the node's " + context.sessionsLimit() + " (" + KernelConfiguration.CALLER_SHARE.name()
                    + "); close some first").asRuntimeException();
        }
        byCaller.merge(caller, 1, Integer::sum);
        admitting++;
    }

    /** Sessions admitted and not yet opened or given back. */
    private int admitting;

    /** An admitted session opened. */
    synchronized void opened(Session session) {
        admitting--;
        open.put(session.endpoint.id(), session);
    }

    /** An admitted session could not open: its place goes back. */
    synchronized void abandoned(String caller) {
        admitting--;
        byCaller.computeIfPresent(caller, (c, n) -> n == 1 ? null : n - 1);
    }

    /** Ends a session (once): its endpoint closes, releasing everything it held. */
    void end(Session session) {
        if (session == null) {
            return;
        }
        boolean removed;
        synchronized (this) {
            removed = open.remove(session.endpoint.id(), session);
            if (removed) {
                byCaller.computeIfPresent(session.caller, (c, n) -> n == 1 ? null : n - 1);
            }
        }
        if (removed) {
            try {
                session.close();
            } catch (RuntimeException e) {
                // The rest of what it held is released regardless (Endpoint.close runs every step).
                LOG.log(Level.WARNING, "ending the session of endpoint " + session.endpoint.id() + ": " + e.getMessage(), e);
            }
        }
    }

    /** A fresh key that proves a call comes from the session it names. */
    long newKey() {
        return keys.nextLong();
    }

    /**
     * The session a call names.
     *
     * @throws io.grpc.StatusRuntimeException NOT_FOUND for an endpoint not open, PERMISSION_DENIED for a wrong key
     */
    Session get(EndpointRef ref) {
        Session session = open.get(ref.getEndpointId());
        if (session == null) {
            throw Status.NOT_FOUND.withDescription("endpoint " + ref.getEndpointId() + " is not open on node " + nodeId
                    + " (an endpoint closes when its session ends)").asRuntimeException();
        }
        if (session.key != ref.getSessionKey()) {
            throw Status.PERMISSION_DENIED.withDescription("endpoint " + ref.getEndpointId() + " on node " + nodeId
                    + " belongs to another session; use the key its SessionOpened carried").asRuntimeException();
        }
        return session;
    }

    int count() {
        return open.size();
    }

    int onRings() {
        return (int) open.values().stream().filter(session -> session.rings() != null).count();
    }

    /** Ends every session (the node is shutting down): streams complete, endpoints close. */
    void closeAll() {
        for (Session session : List.copyOf(open.values())) {
            session.complete();
            end(session);
        }
    }
}
