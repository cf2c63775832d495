package io.pagewire.node.cm;

import io.pagewire.proto.fabric.CmMessage;
import java.util.ArrayList;
import java.util.List;

/** One rdma_cm id as the node keeps it: its channel, port, addresses, and where its connection stands. Guarded by its manager. */
final class CmId {
    /** Where an id is, after the kernel's rdma_cm states and the InfiniBand CM's. */
    enum State {
        IDLE, BOUND, ADDRESS_QUERY, ADDRESS_RESOLVED, ROUTE_QUERY, ROUTE_RESOLVED, LISTEN,
        /** Active: REQ sent, waiting for REP or REJ. */
        REQ_SENT,
        /** Active: REP received, CONNECT_RESPONSE given; the program connects its pair, then rdma_establish sends the RTU. */
        REP_RECEIVED,
        /** Active, UD: SIDR_REQ sent. */
        SIDR_QUERY,
        /** Passive: made by a REQ, CONNECT_REQUEST given; the program accepts or rejects. */
        REQ_RECEIVED,
        /** Passive: REP sent, waiting for the RTU. */
        REP_SENT,
        ESTABLISHED, REJECTED,
        /** DREQ sent, waiting for the DREP. */
        DREQ_SENT,
        /** DISCONNECTED given; TIMEWAIT_EXIT follows. */
        TIMEWAIT, DISCONNECTED, ERROR, DESTROYED
    }

    final int id;
    CmChannel channel;
    final int portSpace;
    final int qpType;
    State state = State.IDLE;

    byte[] src = new byte[0];
    int srcPort;
    /** Whether the id holds its port (a passive id shares its listen's). */
    boolean ownsPort;
    byte[] dst = new byte[0];
    int dstPort;
    /** The address an unanswered query asked about for this id, or null. */
    String resolvingAddress;

    /** The peer's node and its id for this connection (0 until known). */
    String peerNode;
    long remoteId;
    int peerLid;
    /** A datagram service (SIDR) rather than a connection. */
    boolean sidr;
    /** What this side and the peer said (rdma_connect's or rdma_accept's parameters; the REQ's or REP's). */
    CmEvents.Params local;
    CmEvents.Params remote;

    /** LISTEN: the backlog, and the requests made of it not yet accepted or rejected. */
    int backlog;
    final List<CmId> pending = new ArrayList<>();
    /** REQ_RECEIVED: the listen that took the request. */
    CmId listener;

    /** The request being sent until answered, its retries left, and the timer that sends it again. */
    CmMessage lastSent;
    int retriesLeft;
    CmTimers.Timer timer;

    CmId(int id, CmChannel channel, int portSpace, int qpType) {
        this.id = id;
        this.channel = channel;
        this.portSpace = portSpace;
        this.qpType = qpType;
    }

    @Override
    public String toString() {
        return "rdma_cm id " + id + " (" + state + ")";
    }
}
