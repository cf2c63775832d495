package io.pagewire.node.fabric;

import io.grpc.CallOptions;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ClientResponseObserver;
import io.pagewire.node.security.BadInput;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import java.util.function.Predicate;

/**
 * The lanes a node dials: it opens each one to a peer, checks that the node answering is that peer,
 * and dials a broken lane again with a jittered, doubling back-off, until the link is cut or the node
 * closes.
 */
final class Dialer {
    private final BadInput badInput;
    private static final System.Logger LOG = System.getLogger(Dialer.class.getName());

    private final FabricContext context;
    private final long incarnation;
    private final ScheduledExecutorService scheduler;
    /** Whether this node no longer dials (it is closing). */
    private final BooleanSupplier closed;
    /** Whether the link to a peer is cut by fault injection. */
    private final Predicate<String> cut;

    Dialer(FabricContext context, long incarnation, ScheduledExecutorService scheduler, BooleanSupplier closed, Predicate<String> cut,
            BadInput badInput) {
        this.badInput = badInput;
        this.context = context;
        this.incarnation = incarnation;
        this.scheduler = scheduler;
        this.closed = closed;
        this.cut = cut;
    }

    /** Dials lane {@code index} to the link's peer, on the link's channel. */
    void dial(PeerLink link, int index) {
        if (closed.getAsBoolean() || cut.test(link.peer)) {
            return;
        }
        link.dialling[index] = true;
        AtomicReference<Lane> laneRef = new AtomicReference<>();
        ClientResponseObserver<LaneMessage, LaneMessage> responses = new ClientResponseObserver<>() {
            private ClientCallStreamObserver<LaneMessage> requests;

            @Override
            public void beforeStart(ClientCallStreamObserver<LaneMessage> requestStream) {
                requests = requestStream;
                requestStream.disableAutoRequestWithInitial(1);
                Lane lane = new Lane(link.peer, index, Lane.Direction.OUTBOUND, requestStream);
                laneRef.set(lane);
                // The handler can run before the stream is fully started (the onReady race): it only
                // wakes the NIC, which checks readiness itself.
                requestStream.setOnReadyHandler(() -> link.laneReady(lane));
            }

            @Override
            public void onNext(LaneMessage frame) {
                Lane.handle(frame, this::receive, () -> requests.request(1));
            }

            /** Handles one frame; false when it ended the lane. */
            private boolean receive(LaneMessage frame) {
                Lane lane = laneRef.get();
                if (frame == LaneMessage.MALFORMED) {
                    Status malformed = LaneAcceptor.malformed(context.nodeId(), link.peer);
                    badInput.report(BadInput.Source.LANE, link.peer, malformed.getDescription());
                    lane.close(malformed.asRuntimeException());
                    return false;
                }
                if (frame.hasHello()) {
                    if (!frame.getHello().getNodeId().equals(link.peer)) {
                        LOG.log(System.Logger.Level.WARNING, "node at " + link.target + " says it is " + Lane.shown(frame.getHello().getNodeId())
                                + ", expected " + link.peer);
                        lane.close(Status.FAILED_PRECONDITION.withDescription("wrong peer").asRuntimeException());
                        return false;
                    }
                    link.outbound[index] = lane;
                    link.dialling[index] = false;
                    link.attempts[index] = 0;
                    link.noteIncarnation(frame.getHello().getIncarnation());
                    link.laneUp(lane);
                } else if (frame.hasBatch() && !cut.test(link.peer)) {
                    link.received(frame.getBatch());
                }
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
                Lane lane = laneRef.get();
                if (link.outbound[index] == lane) {
                    link.outbound[index] = null;
                }
                link.dialling[index] = false;
                link.laneDown(lane);
                lane.close(null);
                scheduleRedial(link, index);
            }
        };
        ClientCalls.asyncBidiStreamingCall(link.channel.newCall(LaneMarshaller.LANE,
                CallOptions.DEFAULT.withOnReadyThreshold(context.onReadyThresholdBytes())), responses);
        laneRef.get().send(Lane.hello(context.nodeId(), index, incarnation));
    }

    /** Dials every lane of a link that has none and is not being dialled (after a cut link healed). */
    void dialMissing(PeerLink link) {
        if (link.channel == null) {
            return;
        }
        for (int i = 0; i < link.outbound.length; i++) {
            if (link.outbound[i] == null && !link.dialling[i]) {
                dial(link, i);
            }
        }
    }

    private void scheduleRedial(PeerLink link, int index) {
        if (closed.getAsBoolean() || cut.test(link.peer) || link.dialling[index]) {
            return;
        }
        int attempt = Math.min(link.attempts[index]++, 20);
        long backoff = Math.min(context.reconnectBackoffMaxNs(), context.reconnectBackoffMinNs() << Math.min(attempt, 30));
        long jittered = backoff / 5 * 4 + ThreadLocalRandom.current().nextLong(backoff / 5 * 2 + 1);
        link.dialling[index] = true;
        scheduler.schedule(() -> {
            link.dialling[index] = false;
            if (link.outbound[index] == null) {
                dial(link, index);
            }
        }, jittered, TimeUnit.NANOSECONDS);
    }
}
