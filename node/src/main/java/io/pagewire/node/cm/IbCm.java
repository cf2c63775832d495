package io.pagewire.node.cm;

import com.google.protobuf.ByteString;
import io.pagewire.proto.fabric.CmMessage;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The InfiniBand CM's side of the connection manager: the exchanges with peers' managers that make
 * and end a connection (REQ, REP, RTU, REJ, DREQ, DREP; SIDR_REQ and SIDR_REP for datagram ids) and
 * the states an id goes through with them, as the kernel's ib_cm keeps them under rdma_cm. It is
 * called under the manager's lock, by rdma_cm's calls and by messages from the wire.
 */
final class IbCm {
    private final int lid;
    private final byte[] address;
    private final CmIdTable ids;
    private final CmOutbox outbox;
    private final CmRequests requests;
    private final CmTimings timings;
    private final CmCounters counters;
    /** Passive ids made by a peer's REQ, by the peer and its id: a REQ sent again finds its first. */
    private final Map<String, CmId> byRemote = new HashMap<>();

    IbCm(int lid, byte[] address, CmIdTable ids, CmOutbox outbox, CmRequests requests, CmTimings timings, CmCounters counters) {
        this.lid = lid;
        this.address = address;
        this.ids = ids;
        this.outbox = outbox;
        this.requests = requests;
        this.timings = timings;
        this.counters = counters;
    }

    // ---- rdma_cm's calls on a connection ----

    /** rdma_connect: sends the REQ (SIDR_REQ for UDP ids) to the service at the resolved address. */
    void connect(CmId id, CmEvents.Params params) {
        if (id.state != CmId.State.ROUTE_RESOLVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_connect: id " + id.id + " is " + id.state + "; resolve its route first");
        }
        id.local = params;
        CmMessage.Builder req = withParams(CmMessage.newBuilder(), params).setLocalId(id.id).setPortSpace(id.portSpace).setPort(id.dstPort)
                .setAddress(ByteString.copyFrom(id.dst)).setSrcAddress(ByteString.copyFrom(id.src)).setSrcPort(id.srcPort).setPsn(params.psn())
                .setLid(lid);
        if (id.portSpace == CmEvents.PS_UDP || id.qpType == CmEvents.QPT_UD) {
            req.setKind(CmMessage.Kind.SIDR_REQ);
            id.state = CmId.State.SIDR_QUERY;
        } else {
            req.setKind(CmMessage.Kind.REQ);
            id.state = CmId.State.REQ_SENT;
        }
        counters.requestsSent++;
        requests.sendUntilAnswered(id, req.build(), () -> {
            id.state = CmId.State.ROUTE_RESOLVED;
            counters.unreachable++;
            emit(id, CmEvents.UNREACHABLE, -CmEvents.ETIMEDOUT);
        });
    }

    /**
     * rdma_accept on an id a CONNECT_REQUEST made: sends the REP (SIDR_REP for UDP ids); the RTU that
     * answers it makes the id ESTABLISHED.
     */
    void accept(CmId id, CmEvents.Params params) {
        if (id.state != CmId.State.REQ_RECEIVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_accept: id " + id.id + " is " + id.state
                    + "; only an id from a CONNECT_REQUEST is accepted, once");
        }
        id.local = params;
        detachFromListener(id);
        if (id.sidr) {
            outbox.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.SIDR_REP).setLocalId(id.id).setRemoteId(id.remoteId)
                    .setQpn(params.qpn()).setQkey(params.qkey()).setLid(lid).setPrivateData(ByteString.copyFrom(params.privateData())).build());
            id.state = CmId.State.ESTABLISHED;
            return;
        }
        CmMessage rep = withParams(CmMessage.newBuilder(), params).setKind(CmMessage.Kind.REP).setLocalId(id.id).setRemoteId(id.remoteId)
                .setPsn(params.psn()).setLid(lid).build();
        id.state = CmId.State.REP_SENT;
        requests.sendUntilAnswered(id, rep, () -> {
            id.state = CmId.State.ERROR;
            counters.connectErrors++;
            emit(id, CmEvents.CONNECT_ERROR, -CmEvents.ETIMEDOUT);
        });
    }

    private static CmMessage.Builder withParams(CmMessage.Builder message, CmEvents.Params params) {
        return message.setQpn(params.qpn()).setPrivateData(ByteString.copyFrom(params.privateData()))
                .setResponderResources(params.responderResources()).setInitiatorDepth(params.initiatorDepth())
                .setRetryCount(params.retryCount()).setRnrRetryCount(params.rnrRetryCount()).setSrq(params.srq())
                .setFlowControl(params.flowControl());
    }

    /** rdma_reject on an id a CONNECT_REQUEST made: the peer sees REJECTED (reason 28, the consumer's) with the private data. */
    void reject(CmId id, byte[] privateData) {
        if (id.state != CmId.State.REQ_RECEIVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_reject: id " + id.id + " is " + id.state
                    + "; only an id from a CONNECT_REQUEST is rejected, once");
        }
        detachFromListener(id);
        sendReject(id, CmEvents.REJECT_CONSUMER_DEFINED, privateData);
        id.state = CmId.State.REJECTED;
        counters.rejectsSent++;
    }

    private void sendReject(CmId id, int reason, byte[] privateData) {
        if (id.sidr) {
            outbox.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.SIDR_REP).setRemoteId(id.remoteId).setReason(1)
                    .setPrivateData(ByteString.copyFrom(privateData)).build());
        } else {
            outbox.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.REJ).setLocalId(id.id).setRemoteId(id.remoteId)
                    .setReason(reason).setPrivateData(ByteString.copyFrom(privateData)).build());
        }
    }

    /** rdma_establish: the active side's program connected its queue pair itself; the RTU tells the passive side. */
    void establish(CmId id) {
        if (id.state != CmId.State.REP_RECEIVED) {
            throw new CmException(CmException.Code.INVALID, "rdma_establish: id " + id.id + " is " + id.state
                    + "; it follows a CONNECT_RESPONSE");
        }
        outbox.send(id.peerNode, rtu(id));
        id.state = CmId.State.ESTABLISHED;
        counters.established++;
    }

    /**
     * rdma_disconnect: sends the DREQ; the peer sees DISCONNECTED, and so does this id when the DREP
     * comes (or its retries run out). An id already disconnected by its peer answers at once.
     */
    void disconnect(CmId id) {
        switch (id.state) {
            case ESTABLISHED, REP_SENT, REP_RECEIVED -> {
                requests.cancel(id);
                id.state = CmId.State.DREQ_SENT;
                counters.disconnectsSent++;
                requests.sendUntilAnswered(id, dreq(id), () -> disconnected(id));
            }
            case DISCONNECTED, DREQ_SENT, TIMEWAIT -> {
                // Already on its way down (the peer's DREQ came first): nothing more to send.
            }
            default -> throw new CmException(CmException.Code.INVALID, "rdma_disconnect: id " + id.id + " is " + id.state + ", not connected");
        }
    }

    /** rdma_destroy_id's part here: the peer hears that the connection, or the request, is no more. */
    void abandon(CmId id) {
        switch (id.state) {
            case ESTABLISHED, REP_SENT, REP_RECEIVED -> outbox.send(id.peerNode, dreq(id));
            case REQ_RECEIVED -> sendReject(id, CmEvents.REJECT_CONSUMER_DEFINED, new byte[0]);
            case REQ_SENT -> outbox.send(id.peerNode, CmMessage.newBuilder().setKind(CmMessage.Kind.REJ).setLocalId(id.id)
                    .setReason(CmEvents.REJECT_CONSUMER_DEFINED).build());
            default -> {
            }
        }
        detachFromListener(id);
        if (id.peerNode != null && id.remoteId != 0) {
            byRemote.remove(remoteKey(id.peerNode, id.remoteId), id);
        }
    }

    private static CmMessage dreq(CmId id) {
        return CmMessage.newBuilder().setKind(CmMessage.Kind.DREQ).setLocalId(id.id).setRemoteId(id.remoteId).build();
    }

    private static CmMessage rtu(CmId id) {
        return CmMessage.newBuilder().setKind(CmMessage.Kind.RTU).setLocalId(id.id).setRemoteId(id.remoteId).build();
    }

    /** The id's connection is down: DISCONNECTED, then TIMEWAIT_EXIT once the time-wait has passed. */
    private void disconnected(CmId id) {
        requests.cancel(id);
        id.state = CmId.State.TIMEWAIT;
        emit(id, CmEvents.DISCONNECTED, 0);
        requests.after(id, timings.timeWaitMs(), () -> {
            if (id.state == CmId.State.TIMEWAIT) {
                id.state = CmId.State.DISCONNECTED;
                emit(id, CmEvents.TIMEWAIT_EXIT, 0);
            }
        });
    }

    private static void detachFromListener(CmId id) {
        if (id.listener != null) {
            id.listener.pending.remove(id);
            id.listener = null;
        }
    }

    // ---- messages from peers' managers ----

    /** A connection message from {@code from}'s manager; false when it is of another kind. */
    boolean received(String from, CmMessage message) {
        switch (message.getKind()) {
            case REQ, SIDR_REQ -> requestReceived(from, message);
            case REP -> replyReceived(from, message);
            case RTU -> readyToUse(from, message);
            case REJ -> rejectReceived(from, message);
            case DREQ -> disconnectRequested(from, message);
            case DREP -> {
                CmId id = ids.get(message.getRemoteId());
                if (id != null && from.equals(id.peerNode) && id.remoteId == message.getLocalId() && id.state == CmId.State.DREQ_SENT) {
                    disconnected(id);
                }
            }
            case SIDR_REP -> sidrReplyReceived(from, message);
            default -> {
                return false;
            }
        }
        return true;
    }

    /**
     * A peer node's process restarted: its side of every connection with it is gone. Connected ids
     * see DISCONNECTED (their programs' queue pairs fail on their own), an accepted request waiting
     * for its RTU CONNECT_ERROR, a request not yet answered by the program REJECTED; requests this
     * node sent it are answered by the new process (which rejects or ignores them).
     */
    void peerRestarted(String peer) {
        for (CmId id : List.copyOf(ids.all())) {
            if (!peer.equals(id.peerNode)) {
                continue;
            }
            switch (id.state) {
                case ESTABLISHED, REP_RECEIVED, DREQ_SENT -> {
                    counters.disconnectsReceived++;
                    disconnected(id);
                }
                case REP_SENT -> {
                    requests.cancel(id);
                    id.state = CmId.State.ERROR;
                    counters.connectErrors++;
                    emit(id, CmEvents.CONNECT_ERROR, -CmEvents.ECONNRESET);
                }
                case REQ_RECEIVED -> {
                    detachFromListener(id);
                    id.state = CmId.State.REJECTED;
                    emit(id, CmEvents.REJECTED, CmEvents.REJECT_CONSUMER_DEFINED);
                }
                default -> {
                }
            }
        }
    }

    private void requestReceived(String from, CmMessage req) {
        boolean sidr = req.getKind() == CmMessage.Kind.SIDR_REQ;
        CmId earlier = byRemote.get(remoteKey(from, req.getLocalId()));
        if (earlier != null) {
            // Sent again: answer as before (the REP again once accepted), or wait for the program.
            if (earlier.state == CmId.State.REP_SENT && earlier.lastSent != null) {
                outbox.send(from, earlier.lastSent);
            }
            return;
        }
        CmId listener = ids.listenerAt(req.getPortSpace(), req.getPort());
        if (listener == null) {
            counters.rejectsSent++;
            if (sidr) {
                outbox.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.SIDR_REP).setRemoteId(req.getLocalId()).setReason(1).build());
            } else {
                outbox.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.REJ).setRemoteId(req.getLocalId())
                        .setReason(CmEvents.REJECT_INVALID_SERVICE_ID).build());
            }
            return;
        }
        if (listener.pending.size() >= listener.backlog) {
            counters.rejectsSent++;
            outbox.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.REJ).setRemoteId(req.getLocalId())
                    .setReason(CmEvents.REJECT_CONSUMER_DEFINED).build());
            return;
        }
        CmId child = ids.add(listener.channel, listener.portSpace, listener.qpType);
        child.sidr = sidr;
        child.peerNode = from;
        child.remoteId = req.getLocalId();
        child.src = address.clone();
        child.srcPort = listener.srcPort;
        child.dst = req.getSrcAddress().toByteArray();
        child.dstPort = req.getSrcPort();
        child.state = CmId.State.REQ_RECEIVED;
        child.listener = listener;
        child.remote = paramsOf(req);
        child.peerLid = req.getLid();
        listener.pending.add(child);
        byRemote.put(remoteKey(from, req.getLocalId()), child);
        counters.requestsReceived++;
        outbox.event(child, CmEvents.CONNECT_REQUEST, 0, listener.id);
    }

    private void replyReceived(String from, CmMessage rep) {
        CmId id = ids.get(rep.getRemoteId());
        if (id == null || !from.equals(id.peerNode)) {
            return;
        }
        if (id.state == CmId.State.ESTABLISHED && id.remoteId == rep.getLocalId()) {
            outbox.send(from, rtu(id)); // our RTU was lost: the REP came again
            return;
        }
        if (id.state != CmId.State.REQ_SENT) {
            return;
        }
        requests.cancel(id);
        id.remoteId = rep.getLocalId();
        id.remote = paramsOf(rep);
        id.peerLid = rep.getLid();
        id.state = CmId.State.REP_RECEIVED;
        emit(id, CmEvents.CONNECT_RESPONSE, 0);
    }

    private void readyToUse(String from, CmMessage rtu) {
        CmId id = ids.get(rtu.getRemoteId());
        if (id == null || !from.equals(id.peerNode) || id.remoteId != rtu.getLocalId() || id.state != CmId.State.REP_SENT) {
            return;
        }
        requests.cancel(id);
        id.state = CmId.State.ESTABLISHED;
        counters.established++;
        emit(id, CmEvents.ESTABLISHED, 0);
    }

    private void rejectReceived(String from, CmMessage rej) {
        CmId id = ids.get(rej.getRemoteId());
        if (id != null && from.equals(id.peerNode) && id.state == CmId.State.REQ_SENT) {
            requests.cancel(id);
            id.state = CmId.State.REJECTED;
            counters.rejectsReceived++;
            id.remote = privateDataOnly(rej);
            emit(id, CmEvents.REJECTED, rej.getReason());
            return;
        }
        // A requester that gave up (destroyed before the answer): its request's id is rejected, as the kernel's CM reports it.
        CmId pending = byRemote.get(remoteKey(from, rej.getLocalId()));
        if (pending != null && (pending.state == CmId.State.REQ_RECEIVED || pending.state == CmId.State.REP_SENT)) {
            requests.cancel(pending);
            detachFromListener(pending);
            pending.state = CmId.State.REJECTED;
            counters.rejectsReceived++;
            emit(pending, CmEvents.REJECTED, rej.getReason());
        }
    }

    private void disconnectRequested(String from, CmMessage dreq) {
        outbox.send(from, CmMessage.newBuilder().setKind(CmMessage.Kind.DREP).setLocalId(dreq.getRemoteId()).setRemoteId(dreq.getLocalId()).build());
        CmId id = ids.get(dreq.getRemoteId());
        if (id == null || !from.equals(id.peerNode) || id.remoteId != dreq.getLocalId()) {
            return;
        }
        switch (id.state) {
            case ESTABLISHED, REP_SENT, REP_RECEIVED -> {
                counters.disconnectsReceived++;
                disconnected(id);
            }
            case DREQ_SENT -> disconnected(id); // both sides at once
            default -> {
            }
        }
    }

    private void sidrReplyReceived(String from, CmMessage rep) {
        CmId id = ids.get(rep.getRemoteId());
        if (id == null || !from.equals(id.peerNode) || id.state != CmId.State.SIDR_QUERY) {
            return;
        }
        requests.cancel(id);
        if (rep.getReason() != 0) {
            id.state = CmId.State.REJECTED;
            counters.rejectsReceived++;
            id.remote = privateDataOnly(rep);
            emit(id, CmEvents.UNREACHABLE, -CmEvents.ECONNREFUSED);
            return;
        }
        id.remote = new CmEvents.Params(rep.getPrivateData().toByteArray(), 0, 0, 0, 0, false, false, rep.getQpn(), 0, rep.getQkey());
        id.peerLid = rep.getLid();
        id.state = CmId.State.ESTABLISHED;
        emit(id, CmEvents.ESTABLISHED, 0);
    }

    private static CmEvents.Params paramsOf(CmMessage m) {
        return new CmEvents.Params(m.getPrivateData().toByteArray(), m.getResponderResources(), m.getInitiatorDepth(), m.getRetryCount(),
                m.getRnrRetryCount(), m.getSrq(), m.getFlowControl(), m.getQpn(), m.getPsn(), m.getQkey());
    }

    private static CmEvents.Params privateDataOnly(CmMessage m) {
        return new CmEvents.Params(m.getPrivateData().toByteArray(), 0, 0, 0, 0, false, false, 0, 0, 0);
    }

    private static String remoteKey(String node, long remoteId) {
        return node + "#" + remoteId;
    }

    private void emit(CmId id, int type, int status) {
        outbox.event(id, type, status, 0);
    }
}
