package io.pagewire.node.verbs;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.pagewire.kernel.AddressSpace;
import io.pagewire.node.loop.NodeEventLoops;
import io.pagewire.node.nic.Datagram;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.NicException;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.Segment;
import io.pagewire.node.nic.SharedReceiveQueue;
import io.pagewire.proto.verbs.PostReceiveRequest;
import io.pagewire.ring.FaultRecord;
import io.pagewire.proto.verbs.PostRequest;
import io.pagewire.proto.verbs.ReceiveRequest;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionOpened;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.WatchRefused;
import io.pagewire.proto.verbs.WorkRequest;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The session stream: an application opens its session (and endpoint) with the first request, then
 * posts work requests and receives, watches event counters and attaches shared-memory rings on it; the
 * node sends completions, refusals and counter changes back on it. Posts read from a session's rings
 * take the same path as posts on its stream. The stream is flow controlled both ways.
 */
final class SessionStream implements AutoCloseable {
    /** How long a session's ring reader keeps looking at an empty ring before it sleeps, outside latency mode. */
    private static final long RING_IDLE_SPIN_NS = 5_000;

    private final String nodeId;
    private final Nic nic;
    private final Sessions sessions;
    private final ControlCalls control;
    private final RingPort rings;
    private final Executor work;
    private final LidDirectory lids;

    /** @param busyPollNs the node's latency mode (0: off): how long its loops, ring readers included, poll before they block */
    SessionStream(String nodeId, VerbsContext context, Nic nic, Sessions sessions, ControlCalls control, NodeEventLoops loops,
            long busyPollNs, Executor work, Path sharedFiles, LidDirectory lids) {
        this.nodeId = nodeId;
        this.lids = lids;
        this.nic = nic;
        this.sessions = sessions;
        this.control = control;
        this.rings = new RingPort(nodeId, sharedFiles, context.ringBytes(), busyPollNs > 0 ? busyPollNs : RING_IDLE_SPIN_NS,
                context.ringSleepLimitNs(), loops, this::postFromRing, this::faultFromRing);
        this.work = work;
    }

    /**
     * A CPU fault from a session's ring: the kernel agent brings the pages in on the work pool (a
     * fault may wait for swap, which the ring's loop must not), and the answer goes on the event ring.
     */
    private void faultFromRing(Session session, RingPort.Fault fault) {
        Runnable serve = () -> {
            Status failure = null;
            try {
                if (fault.length() <= 0 || fault.length() > FaultRecord.MAX_LENGTH) {
                    throw new IllegalArgumentException("a CPU fault covers 1 to " + FaultRecord.MAX_LENGTH + " bytes, not " + fault.length());
                }
                AddressSpace space = session.endpoint.space();
                space.checkAllocated(fault.address(), fault.length());
                int pageSize = space.pageSize();
                long end = fault.address() + fault.length();
                for (long page = fault.address() & -pageSize; page < end; page += pageSize) {
                    space.touch(page, fault.write());
                }
            } catch (RuntimeException e) {
                failure = StatusMapping.toStatus(e).getStatus();
            }
            session.faultServed(fault.token(), failure);
        };
        try {
            work.execute(serve);
        } catch (RejectedExecutionException e) {
            session.faultServed(fault.token(), Status.UNAVAILABLE.withDescription("node " + nodeId + " is shutting down"));
        }
    }

    /** A record read from a session's request ring. */
    private void postFromRing(Session session, RingPort.Post post) {
        try {
            if (post.receives() != null) {
                postReceives(session, post.qpn(), post.srqId(), post.receives());
            } else {
                post(session, post.qpn(), post.requests());
            }
        } catch (RuntimeException e) {
            Status status = StatusMapping.toStatus(e).getStatus();
            if (post.receives() != null) {
                post.receives().forEach(r -> session.refused(post.qpn(), r.wrId(), status));
            } else {
                for (io.pagewire.node.nic.WorkRequest wr : post.requests()) {
                    session.refused(post.qpn(), wr.wrId(), status);
                }
            }
        }
    }

    /** The session stream of one application: opened by its first request, its endpoint's life. */
    StreamObserver<SessionRequest> open(StreamObserver<SessionEvent> responseObserver) {
        ServerCallStreamObserver<SessionEvent> events = (ServerCallStreamObserver<SessionEvent>) responseObserver;
        AtomicReference<Session> current = new AtomicReference<>();
        // Set once this side ended the stream with an error: whatever the client still sends opens nothing.
        AtomicBoolean failed = new AtomicBoolean();
        events.setOnCancelHandler(() -> sessions.end(current.get()));
        // Flow control: the next request is read only while the client reads its events. A client that
        // stops reading stops being read (its posts wait in its own transport), so neither the
        // completions of its posts nor their refusals pile up in this node's heap.
        AtomicBoolean withheld = new AtomicBoolean();
        events.disableAutoRequest();
        events.setOnReadyHandler(() -> {
            Session session = current.get();
            if (session != null) {
                session.eventsWritable();
            }
            if (withheld.compareAndSet(true, false)) {
                events.request(1);
            }
        });
        events.request(1);
        String caller = ControlCalls.caller();
        return new StreamObserver<>() {
            /** Set when the stream ended (either way): a paced open still waiting then opens nothing. */
            private boolean over;

            @Override
            public void onNext(SessionRequest request) {
                long wait = current.get() == null && request.hasOpen() ? control.admit(caller) : 0;
                if (wait == ControlPacer.REFUSE) {
                    failed.set(true);
                    events.onError(control.overRate().asRuntimeException());
                } else if (wait > 0) {
                    // The next request is not read until the open ran: nothing overtakes it.
                    control.later(wait, () -> {
                        synchronized (this) {
                            if (!over) {
                                handleThenReadNext(request);
                                if (events.isCancelled()) {
                                    sessions.end(current.get()); // cancelled while the open waited: its handler found no session to end
                                }
                            }
                        }
                    });
                } else {
                    handleThenReadNext(request);
                }
            }

            private void handleThenReadNext(SessionRequest request) {
                try {
                    handle(request);
                } finally {
                    if (events.isReady()) {
                        events.request(1);
                    } else {
                        withheld.set(true);
                        // It may have turned ready between the check and the flag: do not wait for a handler that already ran.
                        if (events.isReady() && withheld.compareAndSet(true, false)) {
                            events.request(1);
                        }
                    }
                }
            }

            private void handle(SessionRequest request) {
                if (failed.get()) {
                    return;
                }
                Session session = current.get();
                try {
                    if (session == null) {
                        if (!request.hasOpen()) {
                            failed.set(true);
                            throw Status.FAILED_PRECONDITION.withDescription("a session must start with OpenSession").asRuntimeException();
                        }
                        sessions.admit(caller);
                        try {
                            Endpoint endpoint = nic.openEndpoint(request.getOpen().getName(), caller);
                            session = new Session(nic, endpoint, caller, sessions.newKey(), events, rings);
                        } catch (RuntimeException e) {
                            sessions.abandoned(caller);
                            throw e;
                        }
                        sessions.opened(session);
                        current.set(session);
                        session.send(SessionEvent.newBuilder().setOpened(SessionOpened.newBuilder()
                                .setEndpointId(session.endpoint.id()).setSessionKey(session.key).setNodeId(nodeId)
                                .setPageSize(nic.kernel().memory().pageSize())).build());
                    } else if (request.hasPost()) {
                        post(session, request.getPost());
                    } else if (request.hasPostReceive()) {
                        postReceives(session, request.getPostReceive());
                    } else if (request.hasAttachRings()) {
                        session.offerRings();
                    } else if (request.hasRingsAttached()) {
                        session.ringsAttached(request.getRingsAttached());
                    } else if (request.hasDoorbell()) {
                        rings.wake(session);
                    } else if (request.hasWatch()) {
                        EventCounter counter = session.counter(request.getWatch().getCounterId());
                        if (request.getWatch().getStop()) {
                            session.unwatch(counter);
                        } else {
                            session.watch(counter);
                        }
                    }
                } catch (RuntimeException e) {
                    if (session == null) {
                        failed.set(true);
                        events.onError(StatusMapping.toStatus(e));
                    } else if (request.hasPost()) {
                        Status status = StatusMapping.toStatus(e).getStatus();
                        for (WorkRequest wr : request.getPost().getRequestsList()) {
                            session.refused(request.getPost().getQpn(), wr.getWrId(), status);
                        }
                    } else if (request.hasPostReceive()) {
                        Status status = StatusMapping.toStatus(e).getStatus();
                        for (ReceiveRequest r : request.getPostReceive().getReceivesList()) {
                            session.refused(request.getPostReceive().getQpn(), r.getWrId(), status);
                        }
                    } else if (request.hasWatch()) {
                        // One bad watch is that watch's problem, not the session's: its endpoint and memory stay.
                        session.send(SessionEvent.newBuilder().setWatchRefused(WatchRefused.newBuilder()
                                .setCounterId(request.getWatch().getCounterId())
                                .setError(StatusMapping.toStatus(e).getStatus().getDescription())).build());
                    } else {
                        failed.set(true);
                        sessions.end(session);
                        events.onError(StatusMapping.toStatus(e));
                    }
                }
            }

            @Override
            public void onError(Throwable t) {
                synchronized (this) {
                    over = true;
                }
                sessions.end(current.get());
            }

            @Override
            public void onCompleted() {
                synchronized (this) {
                    over = true;
                }
                Session session = current.get();
                sessions.end(session);
                if (session != null) {
                    session.complete();
                } else {
                    events.onCompleted();
                }
            }
        };
    }

    private void post(Session session, PostRequest post) {
        List<io.pagewire.node.nic.WorkRequest> requests = new ArrayList<>(post.getRequestsCount());
        for (WorkRequest wr : post.getRequestsList()) {
            try {
                List<Segment> local = wr.getSegmentsCount() > 0 ? segments(wr.getSegmentsList())
                        : wr.getLkey() == 0 && wr.getLength() == 0 ? List.of() : List.of(new Segment(wr.getLkey(), wr.getLocalAddress(), wr.getLength()));
                requests.add(new io.pagewire.node.nic.WorkRequest(wr.getWrId(), WireCodes.opcode(wr.getOpcodeValue()), local,
                        io.pagewire.node.nic.WorkRequest.lengthOf(wr.getWrId(), local), wr.getRemoteAddress(), wr.getRkey(), wr.getCounterId(),
                        wr.getAdd(), !wr.getUnsignaled(), wr.getImmediate(), wr.getSwap(), wr.getFence(), wr.getSolicited(),
                        wr.hasDatagram() ? new Datagram(null, wr.getDatagram().getLid(), wr.getDatagram().getQpn(), wr.getDatagram().getQkey(),
                                wr.getDatagram().getGlobalRoute()) : null));
            } catch (NicException e) {
                session.refused(post.getQpn(), wr.getWrId(), e);
            }
        }
        post(session, post.getQpn(), requests);
    }

    /** Posts receive buffers; each one refused (bad lkey, range, access, full queue) is reported on its own. */
    private void postReceives(Session session, PostReceiveRequest post) {
        List<io.pagewire.node.nic.ReceiveRequest> receives = new ArrayList<>(post.getReceivesCount());
        for (ReceiveRequest r : post.getReceivesList()) {
            try {
                receives.add(r.getSegmentsCount() > 0 ? io.pagewire.node.nic.ReceiveRequest.scatter(r.getWrId(), segments(r.getSegmentsList()))
                        : r.getLkey() == 0 && r.getLength() == 0 ? new io.pagewire.node.nic.ReceiveRequest(r.getWrId(), List.of(), 0)
                        : new io.pagewire.node.nic.ReceiveRequest(r.getWrId(), r.getLkey(), r.getAddress(), r.getLength()));
            } catch (NicException e) {
                session.refused(post.getQpn(), r.getWrId(), e);
            }
        }
        postReceives(session, post.getQpn(), post.getSrqId(), receives);
    }

    /** Posts receives from the stream or a ring, to a queue pair or (srqId set) a shared receive queue. */
    private void postReceives(Session session, int qpn, int srqId, List<io.pagewire.node.nic.ReceiveRequest> receives) {
        SharedReceiveQueue srq = srqId == 0 ? null : session.sharedReceiveQueue(srqId);
        QueuePair qp = srq == null ? session.queuePair(qpn) : null;
        for (io.pagewire.node.nic.ReceiveRequest request : receives) {
            try {
                if (srq != null) {
                    srq.post(request);
                } else {
                    qp.postReceive(request);
                }
            } catch (NicException e) {
                session.refused(qpn, request.wrId(), e);
            }
        }
    }

    /** The NIC's scatter/gather elements of a request from the stream. */
    private static List<Segment> segments(List<io.pagewire.proto.verbs.Segment> wire) {
        List<Segment> elements = new ArrayList<>(wire.size());
        for (io.pagewire.proto.verbs.Segment e : wire) {
            elements.add(new Segment(e.getLkey(), e.getAddress(), e.getLength()));
        }
        return elements;
    }

    /** Posts work requests from the stream or from a ring; each one refused is reported on its own. */
    private void post(Session session, int qpn, List<io.pagewire.node.nic.WorkRequest> requests) {
        QueuePair qp = session.queuePair(qpn);
        boolean allHaveOpcodes = true;
        for (io.pagewire.node.nic.WorkRequest wr : requests) {
            allHaveOpcodes &= wr.opcode() != null;
        }
        List<io.pagewire.node.nic.WorkRequest> valid = requests;
        if (!allHaveOpcodes) {
            // Rare: a request without an opcode is refused alone; the list is copied only then.
            valid = new ArrayList<>(requests.size());
            for (io.pagewire.node.nic.WorkRequest wr : requests) {
                if (wr.opcode() == null) {
                    session.refused(qpn, wr.wrId(), Status.INVALID_ARGUMENT.withDescription("work request " + wr.wrId() + " has no opcode"));
                } else {
                    valid.add(wr);
                }
            }
        }
        if (qp.transport() == QueuePair.Transport.UD) {
            valid = addressed(valid);
        }
        qp.postEach(valid, (wr, error) -> session.refused(qpn, wr.wrId(), error));
    }

    /** UD SENDs with the node each one's LID names (none: the NIC drops it, counted). */
    private List<io.pagewire.node.nic.WorkRequest> addressed(List<io.pagewire.node.nic.WorkRequest> requests) {
        List<io.pagewire.node.nic.WorkRequest> out = new ArrayList<>(requests.size());
        for (io.pagewire.node.nic.WorkRequest wr : requests) {
            Datagram d = wr.datagram();
            out.add(d == null || d.node() != null ? wr : wr.to(d.at(lids.nodeOf(d.lid()))));
        }
        return out;
    }

    /** Stops reading every session's rings and deletes their files. */
    @Override
    public void close() {
        rings.close();
    }
}
