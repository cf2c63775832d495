package io.pagewire.node.verbs;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.pagewire.kernel.KernelContext;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.QpAddress;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.ReceiveRequest;
import io.pagewire.node.nic.SharedReceiveQueue;
import io.pagewire.proto.verbs.ArmSharedReceiveQueueRequest;
import io.pagewire.proto.verbs.ArmSharedReceiveQueueResponse;
import io.pagewire.proto.verbs.ConnectQueuePairRequest;
import io.pagewire.proto.verbs.ConnectQueuePairResponse;
import io.pagewire.proto.verbs.CreateQueuePairRequest;
import io.pagewire.proto.verbs.CreateQueuePairResponse;
import io.pagewire.proto.verbs.CreateSharedReceiveQueueRequest;
import io.pagewire.proto.verbs.CreateSharedReceiveQueueResponse;
import io.pagewire.proto.verbs.DestroyQueuePairRequest;
import io.pagewire.proto.verbs.DestroyQueuePairResponse;
import io.pagewire.proto.verbs.DestroySharedReceiveQueueRequest;
import io.pagewire.proto.verbs.DestroySharedReceiveQueueResponse;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SetQueuePairRateLimitRequest;
import io.pagewire.proto.verbs.SetQueuePairRateLimitResponse;
import io.pagewire.proto.verbs.SrqLimitReached;

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
                    request.getSrqId() == 0 ? null : session.sharedReceiveQueue(request.getSrqId()));
            return CreateQueuePairResponse.newBuilder().setAddress(WireCodes.address(qp.address())).build();
        });
    }

    void connectQueuePair(ConnectQueuePairRequest request, StreamObserver<ConnectQueuePairResponse> response) {
        control.paced(response, () -> {
            QueuePair qp = sessions.get(request.getEndpoint()).queuePair(request.getQpn());
            var peer = request.getPeer();
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
            qp.connect(new QpAddress(peer.getNodeId(), peer.getQpn(), peer.getInitialCredits(), peer.getPageSize()));
            return ConnectQueuePairResponse.getDefaultInstance();
        });
    }

    void destroyQueuePair(DestroyQueuePairRequest request, StreamObserver<DestroyQueuePairResponse> response) {
        control.paced(response, () -> {
            sessions.get(request.getEndpoint()).queuePair(request.getQpn()).close();
            return DestroyQueuePairResponse.getDefaultInstance();
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
