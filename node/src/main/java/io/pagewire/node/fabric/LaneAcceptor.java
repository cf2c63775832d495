package io.pagewire.node.fabric;

import io.grpc.ServerServiceDefinition;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.security.BadInput;
import io.pagewire.node.security.PeerIdentity;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.BooleanSupplier;
import java.util.function.Function;
import java.util.function.Predicate;

/**
 * The lanes peers dial: the {@code Fabric} service that accepts them. A lane is admitted only from a
 * node this one accepts, and with mutual TLS only from a caller whose certificate names that very
 * node; it must start with a hello, and it ends at the first frame that is not a lane frame.
 */
final class LaneAcceptor {
    private final BadInput badInput;
    private static final System.Logger LOG = System.getLogger(LaneAcceptor.class.getName());

    private final FabricContext context;
    private final long incarnation;
    private final BooleanSupplier closed;
    private final Predicate<String> cut;
    /** The link to a peer, made at its first lane. */
    private final Function<String, PeerLink> links;
    private final LongAdder refused = new LongAdder();

    LaneAcceptor(FabricContext context, long incarnation, BooleanSupplier closed, Predicate<String> cut, Function<String, PeerLink> links,
            BadInput badInput) {
        this.badInput = badInput;
        this.context = context;
        this.incarnation = incarnation;
        this.closed = closed;
        this.cut = cut;
        this.links = links;
    }

    /** The service peers dial lanes on; the node adds it to its gRPC server. */
    ServerServiceDefinition service() {
        return LaneMarshaller.service(new Service()::lane);
    }

    /** Lanes refused because of who they came from. */
    long refused() {
        return refused.sum();
    }

    /** The status a lane ends with when its peer sent bytes that are not a LaneFrame. */
    static Status malformed(String nodeId, String from) {
        return Status.INVALID_ARGUMENT.withDescription("node " + nodeId + " ended a lane from " + Lane.shown(from)
                + ": a message that is not a lane frame (" + LaneMarshaller.malformedReason() + ")");
    }

    /**
     * Whether a lane whose hello claims {@code peer} may come in from {@code caller}: the id must be
     * one this node accepts, and with mutual TLS the caller's certificate must name that very node.
     * Null when it may; else the status the lane ends with.
     */
    private Status admission(String peer, PeerIdentity caller) {
        String me = "node " + context.nodeId();
        if (context.peerCertificatesRequired()) {
            if (caller == null) {
                return Status.UNAUTHENTICATED.withDescription(me + " refused a lane claiming to be " + Lane.shown(peer)
                        + ": the caller presented no Pagewire certificate");
            }
            if (caller.kind() != PeerIdentity.Kind.NODE) {
                return Status.PERMISSION_DENIED.withDescription(me + " refused a lane claiming to be " + Lane.shown(peer)
                        + ": the caller's certificate is " + Lane.shown(caller.toString()) + "'s, not a node's");
            }
            if (!caller.name().equals(peer)) {
                return Status.PERMISSION_DENIED.withDescription(me + " refused a lane claiming to be " + Lane.shown(peer)
                        + ": the caller's certificate names " + Lane.shown(caller.toString()));
            }
        }
        if (!context.acceptedPeers().contains(peer)) {
            return Status.PERMISSION_DENIED.withDescription(me + " refused a lane from " + Lane.shown(peer)
                    + ": not one of its peers (pagewire.node.peers, pagewire.node.acceptPeers)");
        }
        return null;
    }

    /** The server end of a lane (fabric.proto's Fabric service, over {@link LaneMarshaller}). */
    private final class Service {
        StreamObserver<LaneMessage> lane(StreamObserver<LaneMessage> responseObserver) {
            // Who the caller's certificate says it is; read now, while the call's context is current.
            PeerIdentity caller = PeerIdentity.CURRENT.get();
            ServerCallStreamObserver<LaneMessage> out = (ServerCallStreamObserver<LaneMessage>) responseObserver;
            out.disableAutoRequest();
            out.setOnReadyThreshold(context.onReadyThresholdBytes());
            AtomicReference<Lane> laneRef = new AtomicReference<>();
            AtomicReference<PeerLink> linkRef = new AtomicReference<>();
            out.setOnReadyHandler(() -> {
                Lane lane = laneRef.get();
                PeerLink link = linkRef.get();
                if (lane != null && link != null) {
                    link.laneReady(lane);
                }
            });
            out.request(1);
            return new StreamObserver<>() {
                @Override
                public void onNext(LaneMessage frame) {
                    Lane.handle(frame, this::receive, () -> out.request(1));
                }

                /** Handles one frame; false when it ended the lane. */
                private boolean receive(LaneMessage frame) {
                    Lane lane = laneRef.get();
                    if (frame == LaneMessage.MALFORMED) {
                        Status status = malformed(context.nodeId(), lane == null ? "a caller before its hello" : lane.peer);
                        badInput.report(BadInput.Source.LANE, lane == null ? String.valueOf(caller) : lane.peer, status.getDescription());
                        out.onError(status.asRuntimeException());
                        ended();
                        return false;
                    }
                    if (lane == null) {
                        return accept(frame);
                    }
                    PeerLink link = linkRef.get();
                    if (frame.hasBatch() && !cut.test(link.peer)) {
                        link.received(frame.getBatch());
                    }
                    return true;
                }

                /** The lane's first frame: its hello, from a node this one accepts, or the lane ends. */
                private boolean accept(LaneMessage frame) {
                    if (!frame.hasHello()) {
                        out.onError(Status.INVALID_ARGUMENT.withDescription("a lane must start with a LaneHello").asRuntimeException());
                        return false;
                    }
                    String peer = frame.getHello().getNodeId();
                    if (closed.getAsBoolean() || cut.test(peer) || peer.equals(context.nodeId())) {
                        out.onError(Status.UNAVAILABLE.withDescription("node " + context.nodeId() + " does not accept a lane from "
                                + Lane.shown(peer) + (cut.test(peer) ? ": link cut" : "")).asRuntimeException());
                        return false;
                    }
                    Status refusal = admission(peer, caller);
                    if (refusal != null) {
                        refused.increment();
                        LOG.log(System.Logger.Level.WARNING, refusal.getDescription());
                        out.onError(refusal.asRuntimeException());
                        return false;
                    }
                    PeerLink link = links.apply(peer);
                    int index = frame.getHello().getLaneIndex();
                    Lane lane = new Lane(peer, index, Lane.Direction.INBOUND, out);
                    laneRef.set(lane);
                    linkRef.set(link);
                    lane.send(Lane.hello(context.nodeId(), index, incarnation));
                    link.inbound.add(lane);
                    link.noteIncarnation(frame.getHello().getIncarnation());
                    link.laneUp(lane);
                    return true;
                }

                @Override
                public void onError(Throwable t) {
                    ended();
                }

                @Override
                public void onCompleted() {
                    ended();
                }

                private void ended() {
                    Lane lane = laneRef.getAndSet(null);
                    if (lane != null) {
                        linkRef.get().laneDown(lane);
                        lane.close(null);
                    }
                }
            };
        }
    }
}
