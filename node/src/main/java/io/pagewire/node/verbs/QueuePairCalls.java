package io.pagewire.node.verbs;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.pagewire.kernel.KernelContext;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.nic.ConnectionAttributes;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.QpAddress;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.ReceiveRequest;
import io.pagewire.node.nic.SharedReceiveQueue;
import io.pagewire.proto.verbs.AttachMulticastRequest;
import io.pagewire.proto.verbs.AttachMulticastResponse;
import io.pagewire.proto.verbs.ArmSharedReceiveQueueRequest;
import io.pagewire.proto.verbs.ArmSharedReceiveQueueResponse;
import io.pagewire.proto.verbs.ConnectQueuePairRequest;
import io.pagewire.proto.verbs.ConnectQueuePairResponse;
import io.pagewire.proto.verbs.CreateQueuePairRequest;
import io.pagewire.proto.verbs.QueuePairTransport;
import io.pagewire.proto.verbs.CreateQueuePairResponse;
import io.pagewire.proto.verbs.CreateSharedReceiveQueueRequest;
import io.pagewire.proto.verbs.CreateSharedReceiveQueueResponse;
import io.pagewire.proto.verbs.DestroyQueuePairRequest;
import io.pagewire.proto.verbs.ModifyQueuePairRequest;
import io.pagewire.proto.verbs.ModifyQueuePairResponse;
import io.pagewire.proto.verbs.DestroyQueuePairResponse;
import io.pagewire.proto.verbs.DestroySharedReceiveQueueRequest;
import io.pagewire.proto.verbs.DestroySharedReceiveQueueResponse;
import io.pagewire.proto.verbs.EndpointRef;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SetQueuePairRateLimitRequest;
import io.pagewire.proto.verbs.SetQueuePairRateLimitResponse;
import io.pagewire.proto.verbs.SrqLimitReached;
import java.util.function.Function;

/**
 * The calls on a session's queue pairs and shared receive queues: create, connect to a peer's, rate
 * limit and destroy them (what {@code ibv_create_qp}, {@code ibv_modify_qp} and {@code ibv_create_srq} do).
 */
final class QueuePairCalls {
    private final String nodeId;
    private final Nic nic;
    private final Fabric fabric;
    private final Sessions sessions;
    private final ControlCalls control;

    QueuePairCalls(String nodeId, Nic nic, Fabric fabric, Sessions sessions, ControlCalls control) {
        this.nodeId = nodeId;
        this.nic = nic;
        this.fabric = fabric;
        this.sessions = sessions;
        this.control = control;
    }

    void createQueuePair(CreateQueuePairRequest request, StreamObserver<CreateQueuePairResponse> response) {
        control.paced(response, () -> {
            Session session = sessions.get(request.getEndpoint());
            QueuePair qp = nic.createQueuePair(session.endpoint, session.completions,
                    request.getSrqId() == 0 ? null : session.sharedReceiveQueue(request.getSrqId()),
                    switch (request.getTransport()) {
                        case UNRELIABLE_CONNECTED -> QueuePair.Transport.UC;
                        case UNRELIABLE_DATAGRAM -> QueuePair.Transport.UD;
                        case RELIABLE_CONNECTED -> QueuePair.Transport.RC;
                        default -> throw new IllegalArgumentException("queue pair transport " + request.getTransportValue()
                                + " is none of RC, UC and UD");
                    });
            qp.protectionDomain(request.getProtectionDomain());
            return CreateQueuePairResponse.newBuilder().setAddress(WireCodes.address(qp.address())).build();
        });
    }

    void connectQueuePair(ConnectQueuePairRequest request, StreamObserver<ConnectQueuePairResponse> response) {
        control.paced(response, () -> {
            QueuePair qp = sessions.get(request.getEndpoint()).queuePair(request.getQpn());
            qp.connect(peerAddress(request.getPeer()));
            return ConnectQueuePairResponse.getDefaultInstance();
        });
    }

    /**
     * Modifies a queue pair after the posts its session made before the call, as an HCA's queues hold what was
     * posted before a modify: a move to ERROR flushes every receive posted before it, a RESET drops them.
     */
    void modifyQueuePair(ModifyQueuePairRequest request, StreamObserver<ModifyQueuePairResponse> response) {
        afterPostsMadeBefore(request.getEndpoint(), response, session -> modify(session, request));
    }

    /** Answers with {@code work} once the session's posts made before this call have reached their pairs. */
    private <T> void afterPostsMadeBefore(EndpointRef endpoint, StreamObserver<T> response, Function<Session, T> work) {
        control.pacedStart(response, () -> {
            Session session;
            try {
                session = sessions.get(endpoint);
            } catch (RuntimeException e) {
                response.onError(StatusMapping.toStatus(e));
                return;
            }
            session.afterPostsMadeBefore(() -> control.onPool(() -> ControlCalls.answer(response, () -> work.apply(session))));
        });
    }

    private ModifyQueuePairResponse modify(Session session, ModifyQueuePairRequest request) {
        QueuePair qp = session.queuePair(request.getQpn());
        if ((request.getAttributes() & ModifyQueuePairRequest.Attribute.QKEY_VALUE) != 0) {
            qp.qkey(request.getQkey());
        }
        if ((request.getAttributes() & ModifyQueuePairRequest.Attribute.REMOTE_ACCESS_VALUE) != 0) {
            qp.remoteAccess(WireCodes.access(request.getRemoteAccessList()));
        }
        switch (request.getState()) {
            case RESET -> nic.reset(qp);
            case READY_TO_RECEIVE -> qp.readyToReceive(qp.transport() == QueuePair.Transport.UD ? null : peerAddress(request.getPeer()),
                    attributes(qp.attributes(), request));
            case READY_TO_SEND -> qp.readyToSend(attributes(qp.attributes(), request));
            case SEND_QUEUE_DRAINED -> qp.drainSendQueue();
            case ERROR -> qp.moveToError();
            default -> throw new IllegalArgumentException("a queue pair moves to RESET, READY_TO_RECEIVE, READY_TO_SEND, "
                    + "SEND_QUEUE_DRAINED or ERROR; state " + request.getStateValue() + " is none of them");
        }
        return ModifyQueuePairResponse.getDefaultInstance();
    }

    /** The pair's attributes with those the request sets; an acknowledgement timeout below the node's floor is raised to it. */
    private ConnectionAttributes attributes(ConnectionAttributes now, ModifyQueuePairRequest request) {
        int set = request.getAttributes();
        boolean timeoutSet = (set & ModifyQueuePairRequest.Attribute.ACK_TIMEOUT_VALUE) != 0;
        long timeout = timeoutSet ? request.getAckTimeoutNs() : now.ackTimeoutNs();
        if (timeoutSet && timeout != 0) {
            timeout = Math.max(timeout, nic.context().minAckTimeoutNs());
        }
        return new ConnectionAttributes(
                (set & ModifyQueuePairRequest.Attribute.SEND_PSN_VALUE) != 0 ? Integer.toUnsignedLong(request.getSendPsn()) : now.sendPsn(),
                (set & ModifyQueuePairRequest.Attribute.RECEIVE_PSN_VALUE) != 0 ? Integer.toUnsignedLong(request.getReceivePsn()) : now.receivePsn(),
                timeout,
                (set & ModifyQueuePairRequest.Attribute.RETRY_COUNT_VALUE) != 0 ? count(request.getRetryCount()) : now.retryCount(),
                (set & ModifyQueuePairRequest.Attribute.RNR_RETRY_COUNT_VALUE) != 0 ? count(request.getRnrRetryCount()) : now.rnrRetryCount(),
                (set & ModifyQueuePairRequest.Attribute.RNR_DELAY_VALUE) != 0 ? request.getRnrDelayNs() : now.rnrDelayNs());
    }

    /** An unsigned count as an int, saturating (ConnectionAttributes refuses what is too large). */
    private static int count(int unsigned) {
        return (int) Math.min(Integer.toUnsignedLong(unsigned), Integer.MAX_VALUE);
    }

    /** A peer's address as a request gives it, checked: a node's page size, complete, and a node this one has a link to. */
    private QpAddress peerAddress(io.pagewire.proto.verbs.QpAddress peer) {
        if (peer.getPageSize() != 0 && (Integer.bitCount(peer.getPageSize()) != 1 || peer.getPageSize() < 512
                || peer.getPageSize() > KernelContext.MAX_PAGE_SIZE)) {
            throw new IllegalArgumentException("peer page size " + Integer.toUnsignedString(peer.getPageSize())
                    + " is not a node's page size: a power of two from 512 bytes to 2 MiB");
        }
        if (peer.getNodeId().isEmpty() || peer.getQpn() == 0 || peer.getPageSize() == 0) {
            throw new IllegalArgumentException("peer address " + peer.getNodeId() + "/" + peer.getQpn() + " is incomplete: it needs the node id, "
                    + "queue pair number, credits and page size that CreateQueuePair returned on the peer");
        }
        if (!peer.getNodeId().equals(nodeId) && !fabric.knowsPeer(peer.getNodeId())) {
            throw Status.FAILED_PRECONDITION.withDescription("node " + nodeId + " has no link to node " + peer.getNodeId()
                    + "; known peers: " + fabric.links().keySet()).asRuntimeException();
        }
        return new QpAddress(peer.getNodeId(), peer.getQpn(), peer.getInitialCredits(), peer.getPageSize());
    }

    /**
     * Destroys a queue pair after the posts its session made before the call: those travel on the
     * session's request ring, this call on another path, and would otherwise be refused as posts to
     * a closed pair.
     */
    void destroyQueuePair(DestroyQueuePairRequest request, StreamObserver<DestroyQueuePairResponse> response) {
        afterPostsMadeBefore(request.getEndpoint(), response, session -> {
            session.queuePair(request.getQpn()).close();
            return DestroyQueuePairResponse.getDefaultInstance();
        });
    }

    void attachMulticast(AttachMulticastRequest request, StreamObserver<AttachMulticastResponse> response) {
        control.paced(response, () -> {
            QueuePair qp = sessions.get(request.getEndpoint()).queuePair(request.getQpn());
            if (request.getDetach()) {
                nic.detachMulticast(qp, request.getLid());
            } else {
                nic.attachMulticast(qp, request.getLid());
            }
            return AttachMulticastResponse.getDefaultInstance();
        });
    }

    void setQueuePairRateLimit(SetQueuePairRateLimitRequest request,
            StreamObserver<SetQueuePairRateLimitResponse> response) {
        control.paced(response, () -> {
            sessions.get(request.getEndpoint()).queuePair(request.getQpn()).rateLimit(request.getBytesPerSecond(), request.getBurstBytes());
            return SetQueuePairRateLimitResponse.getDefaultInstance();
        });
    }

    // ---- shared receive queues ----------------------------------------------------------------------

    void createSharedReceiveQueue(CreateSharedReceiveQueueRequest request,
            StreamObserver<CreateSharedReceiveQueueResponse> response) {
        control.paced(response, () -> CreateSharedReceiveQueueResponse.newBuilder()
                .setSrqId(sessions.get(request.getEndpoint()).endpoint.createSharedReceiveQueue().id()).build());
    }

    void armSharedReceiveQueue(ArmSharedReceiveQueueRequest request,
            StreamObserver<ArmSharedReceiveQueueResponse> response) {
        control.paced(response, () -> {
            Session session = sessions.get(request.getEndpoint());
            SharedReceiveQueue srq = session.sharedReceiveQueue(request.getSrqId());
            if (request.getLimit() > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("an SRQ limit must be below 2^31, was " + request.getLimit());
            }
            srq.arm(request.getLimit(), () -> session.send(SessionEvent.newBuilder()
                    .setSrqLimitReached(SrqLimitReached.newBuilder().setSrqId(srq.id())).build()));
            return ArmSharedReceiveQueueResponse.getDefaultInstance();
        });
    }

    void destroySharedReceiveQueue(DestroySharedReceiveQueueRequest request,
            StreamObserver<DestroySharedReceiveQueueResponse> response) {
        control.paced(response, () -> {
            var dropped = DestroySharedReceiveQueueResponse.newBuilder();
            for (ReceiveRequest r : sessions.get(request.getEndpoint()).sharedReceiveQueue(request.getSrqId()).destroy()) {
                dropped.addDroppedWrIds(r.wrId());
            }
            return dropped.build();
        });
    }
}
