package io.pagewire.node.verbs;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.RegionCounters;
import io.pagewire.node.nic.QpAddress;
import io.pagewire.node.nic.NicException;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.SharedReceiveQueue;
import io.pagewire.node.security.CallerAuthentication;
import io.pagewire.proto.verbs.AdviseRequest;
import io.pagewire.proto.verbs.AdviseResponse;
import io.pagewire.proto.verbs.AllocateRequest;
import io.pagewire.proto.verbs.AllocateResponse;
import io.pagewire.proto.verbs.AwaitEventCounterRequest;
import io.pagewire.proto.verbs.AwaitEventCounterResponse;
import io.pagewire.proto.verbs.ConnectQueuePairRequest;
import io.pagewire.proto.verbs.ConnectQueuePairResponse;
import io.pagewire.proto.verbs.CreateEventCounterRequest;
import io.pagewire.proto.verbs.CreateEventCounterResponse;
import io.pagewire.proto.verbs.CreateQueuePairRequest;
import io.pagewire.proto.verbs.CreateQueuePairResponse;
import io.pagewire.proto.verbs.DeregisterRegionRequest;
import io.pagewire.proto.verbs.DeregisterRegionResponse;
import io.pagewire.proto.verbs.DescribeNodeRequest;
import io.pagewire.proto.verbs.DestroyEventCounterRequest;
import io.pagewire.proto.verbs.DestroyEventCounterResponse;
import io.pagewire.proto.verbs.DescribeNodeResponse;
import io.pagewire.proto.verbs.DestroyQueuePairRequest;
import io.pagewire.proto.verbs.DestroyQueuePairResponse;
import io.pagewire.proto.verbs.EndpointRef;
import io.pagewire.proto.verbs.FreeRequest;
import io.pagewire.proto.verbs.FreeResponse;
import io.pagewire.proto.verbs.LoadRequest;
import io.pagewire.proto.verbs.LoadResponse;
import io.pagewire.proto.verbs.PostRequest;
import io.pagewire.proto.verbs.ReadEventCounterRequest;
import io.pagewire.proto.verbs.ReadEventCounterResponse;
import io.pagewire.proto.verbs.ReadRegionStatsRequest;
import io.pagewire.proto.verbs.ReadStatsRequest;
import io.pagewire.proto.verbs.ReadStatsResponse;
import io.pagewire.proto.verbs.RegionStats;
import io.pagewire.proto.verbs.RegisterRegionRequest;
import io.pagewire.proto.verbs.RegisterRegionResponse;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionOpened;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.StoreRequest;
import io.pagewire.proto.verbs.StoreResponse;
import io.pagewire.proto.verbs.VerbsGrpc;
import io.pagewire.proto.verbs.WatchRefused;
import io.pagewire.proto.verbs.WorkRequest;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * The service applications use to drive a node: sessions (endpoints), memory, registrations, queue
 * pairs, posts and event counters. Every call is checked against the session that owns the
 * endpoint; every failure becomes a status whose description says what to fix. No call blocks a
 * thread while it waits (counter waits and prefetches answer when they finish).
 */
public final class VerbsService extends VerbsGrpc.VerbsImplBase {
    /** Largest single Load, so that a response fits the message limit. */
    private static final int MAX_LOAD = 16 << 20;

    private final PagewireNode node;
    private final ScheduledExecutorService scheduler;
    private final Map<Integer, Session> sessions = new ConcurrentHashMap<>();
    private final SecureRandom keys = new SecureRandom();

    private final RingPort rings;
    /** Where paced operations run once their wait is over (the pool unary calls run on). */
    private final java.util.concurrent.Executor work;
    private final ControlPacer pacer;
    /** The longest a paced operation waits; a caller further over its rate is refused. */
    private static final long MAX_PACING_DELAY_NS = 10_000_000_000L;

    public VerbsService(PagewireNode node, ScheduledExecutorService scheduler, java.util.concurrent.Executor work) {
        this.node = node;
        this.scheduler = scheduler;
        this.work = work;
        this.pacer = new ControlPacer(node.context().controlOpsPerSecond(), node.context().controlBurst(), MAX_PACING_DELAY_NS);
        String directory = node.context().ringDirectory();
        this.rings = new RingPort(node.id(), directory == null || directory.isEmpty() ? null : java.nio.file.Path.of(directory),
                node.context().ringBytes(), node.context().busyPollNs() > 0 ? node.context().busyPollNs() : RING_IDLE_SPIN_NS, node.eventLoops(),
                (session, post) -> {
                    try {
                        if (post.receives() != null) {
                            postReceives(session, post.qpn(), post.srqId(), post.receives());
                        } else {
                            post(session, post.qpn(), post.requests());
                        }
                    } catch (RuntimeException e) {
                        String error = StatusMapping.toStatus(e).getStatus().getDescription();
                        if (post.receives() != null) {
                            post.receives().forEach(r -> session.refused(post.qpn(), r.wrId(), error));
                        } else {
                            for (io.pagewire.node.nic.WorkRequest wr : post.requests()) {
                                session.refused(post.qpn(), wr.wrId(), error);
                            }
                        }
                    }
                });
    }

    /** How long a session's ring reader keeps looking at an empty ring before it sleeps, outside latency mode. */
    private static final long RING_IDLE_SPIN_NS = 5_000;

    /** Sessions open now. */
    public int sessionCount() {
        return sessions.size();
    }

    /** Ends every session (the node is shutting down): streams complete, endpoints close. */
    public void closeAll() {
        for (Session session : List.copyOf(sessions.values())) {
            session.complete();
            session.close();
        }
        sessions.clear();
        rings.close();
    }

    // ---- the session --------------------------------------------------------------------------------

    @Override
    public StreamObserver<SessionRequest> session(StreamObserver<SessionEvent> responseObserver) {
        ServerCallStreamObserver<SessionEvent> events = (ServerCallStreamObserver<SessionEvent>) responseObserver;
        AtomicReference<Session> current = new AtomicReference<>();
        // Set once this side ended the stream with an error: whatever the client still sends opens nothing.
        java.util.concurrent.atomic.AtomicBoolean failed = new java.util.concurrent.atomic.AtomicBoolean();
        events.setOnCancelHandler(() -> end(current.get()));
        // Flow control: the next request is read only while the client reads its events. A client that
        // stops reading stops being read (its posts wait in its own transport), so neither the
        // completions of its posts nor their refusals pile up in this node's heap.
        java.util.concurrent.atomic.AtomicBoolean withheld = new java.util.concurrent.atomic.AtomicBoolean();
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
        String caller = caller();
        return new StreamObserver<>() {
            /** Set when the stream ended (either way): a paced open still waiting then opens nothing. */
            private boolean over;

            @Override
            public void onNext(SessionRequest request) {
                long wait = current.get() == null && request.hasOpen() ? pacer.admit(caller) : 0;
                if (wait == ControlPacer.REFUSE) {
                    failed.set(true);
                    events.onError(overRate().asRuntimeException());
                } else if (wait > 0) {
                    // The next request is not read until the open ran: nothing overtakes it.
                    scheduler.schedule(() -> work.execute(() -> {
                        synchronized (this) {
                            if (!over) {
                                handleThenReadNext(request);
                                if (events.isCancelled()) {
                                    end(current.get()); // cancelled while the open waited: its handler found no session to end
                                }
                            }
                        }
                    }), wait, TimeUnit.NANOSECONDS);
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
                        int limit = node.context().sessionsLimit();
                        if (sessions.size() >= limit) {
                            failed.set(true);
                            throw Status.RESOURCE_EXHAUSTED.withDescription("node " + node.id() + " serves " + sessions.size()
                                    + " sessions, its limit (pagewire.quota.sessions)").asRuntimeException();
                        }
                        Endpoint endpoint = node.nic().openEndpoint(request.getOpen().getName());
                        session = new Session(endpoint, keys.nextLong(), events, rings);
                        sessions.put(endpoint.id(), session);
                        current.set(session);
                        session.send(SessionEvent.newBuilder().setOpened(SessionOpened.newBuilder()
                                .setEndpointId(endpoint.id()).setSessionKey(session.key).setNodeId(node.id())
                                .setPageSize(node.kernel().memory().pageSize())).build());
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
                        EventCounter counter = counter(session, request.getWatch().getCounterId());
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
                        for (WorkRequest wr : request.getPost().getRequestsList()) {
                            session.refused(request.getPost().getQpn(), wr.getWrId(), StatusMapping.toStatus(e).getStatus().getDescription());
                        }
                    } else if (request.hasPostReceive()) {
                        for (io.pagewire.proto.verbs.ReceiveRequest r : request.getPostReceive().getReceivesList()) {
                            session.refused(request.getPostReceive().getQpn(), r.getWrId(), StatusMapping.toStatus(e).getStatus().getDescription());
                        }
                    } else if (request.hasWatch()) {
                        // One bad watch is that watch's problem, not the session's: its endpoint and memory stay.
                        session.send(SessionEvent.newBuilder().setWatchRefused(WatchRefused.newBuilder()
                                .setCounterId(request.getWatch().getCounterId())
                                .setError(StatusMapping.toStatus(e).getStatus().getDescription())).build());
                    } else {
                        failed.set(true);
                        end(session);
                        events.onError(StatusMapping.toStatus(e));
                    }
                }
            }

            @Override
            public void onError(Throwable t) {
                synchronized (this) {
                    over = true;
                }
                end(current.get());
            }

            @Override
            public void onCompleted() {
                synchronized (this) {
                    over = true;
                }
                Session session = current.get();
                end(session);
                if (session != null) {
                    session.complete();
                } else {
                    events.onCompleted();
                }
            }
        };
    }

    private void end(Session session) {
        if (session != null && sessions.remove(session.endpoint.id(), session)) {
            session.close();
        }
    }

    private void post(Session session, PostRequest post) {
        List<io.pagewire.node.nic.WorkRequest> requests = new ArrayList<>(post.getRequestsCount());
        for (WorkRequest wr : post.getRequestsList()) {
            requests.add(new io.pagewire.node.nic.WorkRequest(wr.getWrId(), Session.nicOpcode(wr.getOpcode()), wr.getLkey(), wr.getLocalAddress(),
                    wr.getLength(), wr.getRemoteAddress(), wr.getRkey(), wr.getCounterId(), wr.getAdd(), !wr.getUnsignaled(), wr.getImmediate(), wr.getSwap()));
        }
        post(session, post.getQpn(), requests);
    }

    /** Posts receive buffers; each one refused (bad lkey, range, access, full queue) is reported on its own. */
    private void postReceives(Session session, io.pagewire.proto.verbs.PostReceiveRequest post) {
        List<io.pagewire.node.nic.ReceiveRequest> receives = new ArrayList<>(post.getReceivesCount());
        for (io.pagewire.proto.verbs.ReceiveRequest r : post.getReceivesList()) {
            receives.add(new io.pagewire.node.nic.ReceiveRequest(r.getWrId(), r.getLkey(), r.getAddress(), r.getLength()));
        }
        postReceives(session, post.getQpn(), post.getSrqId(), receives);
    }

    /** Posts receives from the stream or a ring, to a queue pair or (srqId set) a shared receive queue. */
    private void postReceives(Session session, int qpn, int srqId, List<io.pagewire.node.nic.ReceiveRequest> receives) {
        SharedReceiveQueue srq = srqId == 0 ? null : sharedReceiveQueue(session, srqId);
        QueuePair qp = srq == null ? queuePair(session, qpn) : null;
        for (io.pagewire.node.nic.ReceiveRequest request : receives) {
            try {
                if (srq != null) {
                    srq.post(request);
                } else {
                    qp.postReceive(request);
                }
            } catch (NicException e) {
                session.refused(qpn, request.wrId(), e.getMessage());
            }
        }
    }

    /** Posts work requests from the stream or from a ring; each one refused is reported on its own. */
    private void post(Session session, int qpn, List<io.pagewire.node.nic.WorkRequest> requests) {
        QueuePair qp = queuePair(session, qpn);
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
                    session.refused(qpn, wr.wrId(), "work request " + wr.wrId() + " has no opcode");
                } else {
                    valid.add(wr);
                }
            }
        }
        qp.postEach(valid, (wr, error) -> session.refused(qpn, wr.wrId(), error.getMessage()));
    }

    // ---- memory -------------------------------------------------------------------------------------

    @Override
    public void allocate(AllocateRequest request, StreamObserver<AllocateResponse> response) {
        paced(response, () -> {
            Session session = session(request.getEndpoint());
            long limit = node.context().virtualBytesPerSession();
            synchronized (session.allocation) {
                long allocated = session.endpoint.space().allocatedBytes();
                if (request.getLength() > limit - allocated) {
                    throw Status.RESOURCE_EXHAUSTED.withDescription("endpoint " + session.endpoint.id() + " has " + allocated
                            + " bytes of virtual memory; " + request.getLength() + " more would pass its limit of " + limit
                            + " (pagewire.quota.virtualBytesPerSession)").asRuntimeException();
                }
                long address = session.endpoint.space().allocate(request.getLength());
                return AllocateResponse.newBuilder().setAddress(address).build();
            }
        });
    }

    @Override
    public void free(FreeRequest request, StreamObserver<FreeResponse> response) {
        paced(response, () -> {
            session(request.getEndpoint()).endpoint.space().free(request.getAddress());
            return FreeResponse.getDefaultInstance();
        });
    }

    @Override
    public void pageOut(io.pagewire.proto.verbs.PageOutRequest request, StreamObserver<io.pagewire.proto.verbs.PageOutResponse> response) {
        paced(response, () -> io.pagewire.proto.verbs.PageOutResponse.newBuilder()
                .setPages(session(request.getEndpoint()).endpoint.space().pageOut(request.getAddress(), request.getLength())).build());
    }

    @Override
    public void store(StoreRequest request, StreamObserver<StoreResponse> response) {
        answer(response, () -> {
            session(request.getEndpoint()).endpoint.space().store(request.getAddress(), request.getData().asReadOnlyByteBuffer());
            return StoreResponse.getDefaultInstance();
        });
    }

    @Override
    public void load(LoadRequest request, StreamObserver<LoadResponse> response) {
        answer(response, () -> {
            long length = Integer.toUnsignedLong(request.getLength());
            if (length > MAX_LOAD) {
                throw new IllegalArgumentException("a load takes at most " + MAX_LOAD + " bytes, asked for " + length);
            }
            byte[] data = new byte[request.getLength()];
            session(request.getEndpoint()).endpoint.space().load(request.getAddress(), data, 0, data.length);
            return LoadResponse.newBuilder().setData(UnsafeByteOperations.unsafeWrap(data)).build();
        });
    }

    // ---- registration ---------------------------------------------------------------------------------

    @Override
    public void registerRegion(RegisterRegionRequest request, StreamObserver<RegisterRegionResponse> response) {
        paced(response, () -> {
            Endpoint endpoint = session(request.getEndpoint()).endpoint;
            Set<Access> access = access(request.getAccessList());
            MemoryRegion region;
            if (request.getImplicit()) {
                region = endpoint.registerImplicit(access);
            } else {
                region = endpoint.register(request.getAddress(), request.getLength(), mode(request.getMode()), access);
            }
            return RegisterRegionResponse.newBuilder().setLkey(region.lkey()).setRkey(region.rkey())
                    .setAddress(region.address()).setLength(region.length()).build();
        });
    }

    @Override
    public void deregisterRegion(DeregisterRegionRequest request, StreamObserver<DeregisterRegionResponse> response) {
        paced(response, () -> {
            Endpoint endpoint = session(request.getEndpoint()).endpoint;
            endpoint.deregister(region(endpoint, request.getLkey()));
            return DeregisterRegionResponse.getDefaultInstance();
        });
    }

    @Override
    public void advise(AdviseRequest request, StreamObserver<AdviseResponse> response) {
        pacedStart(response, () -> adviseNow(request, response));
    }

    private void adviseNow(AdviseRequest request, StreamObserver<AdviseResponse> response) {
        try {
            Endpoint endpoint = session(request.getEndpoint()).endpoint;
            Endpoint.Advice advice = switch (request.getAdvice()) {
                case PREFETCH -> Endpoint.Advice.PREFETCH;
                case PREFETCH_WRITE -> Endpoint.Advice.PREFETCH_WRITE;
                case PREFETCH_NO_FAULT -> Endpoint.Advice.PREFETCH_NO_FAULT;
                default -> throw new IllegalArgumentException("advice must be PREFETCH, PREFETCH_WRITE or PREFETCH_NO_FAULT");
            };
            endpoint.advise(region(endpoint, request.getLkey()), request.getAddress(), request.getLength(), advice)
                    .whenComplete((done, error) -> {
                        if (error != null) {
                            response.onError(StatusMapping.toStatus(error));
                        } else {
                            response.onNext(AdviseResponse.getDefaultInstance());
                            response.onCompleted();
                        }
                    });
        } catch (RuntimeException e) {
            response.onError(StatusMapping.toStatus(e));
        }
    }

    // ---- queue pairs --------------------------------------------------------------------------------

    @Override
    public void createQueuePair(CreateQueuePairRequest request, StreamObserver<CreateQueuePairResponse> response) {
        paced(response, () -> {
            Session session = session(request.getEndpoint());
            QueuePair qp = node.nic().createQueuePair(session.endpoint, session.completions,
                    request.getSrqId() == 0 ? null : sharedReceiveQueue(session, request.getSrqId()));
            return CreateQueuePairResponse.newBuilder().setAddress(address(qp.address())).build();
        });
    }

    @Override
    public void connectQueuePair(ConnectQueuePairRequest request, StreamObserver<ConnectQueuePairResponse> response) {
        paced(response, () -> {
            QueuePair qp = queuePair(session(request.getEndpoint()), request.getQpn());
            var peer = request.getPeer();
            if (peer.getPageSize() != 0 && (Integer.bitCount(peer.getPageSize()) != 1 || peer.getPageSize() < 512
                    || peer.getPageSize() > io.pagewire.kernel.KernelContext.MAX_PAGE_SIZE)) {
                throw new IllegalArgumentException("peer page size " + Integer.toUnsignedString(peer.getPageSize())
                        + " is not a node's page size: a power of two from 512 bytes to 2 MiB");
            }
            if (peer.getNodeId().isEmpty() || peer.getQpn() == 0 || peer.getPageSize() == 0) {
                throw new IllegalArgumentException("peer address " + peer.getNodeId() + "/" + peer.getQpn() + " is incomplete: it needs the node id, "
                        + "queue pair number, credits and page size that CreateQueuePair returned on the peer");
            }
            if (!peer.getNodeId().equals(node.id()) && !node.fabric().knowsPeer(peer.getNodeId())) {
                throw Status.FAILED_PRECONDITION.withDescription("node " + node.id() + " has no link to node " + peer.getNodeId()
                        + "; known peers: " + node.fabric().links().keySet()).asRuntimeException();
            }
            qp.connect(new QpAddress(peer.getNodeId(), peer.getQpn(), peer.getInitialCredits(), peer.getPageSize()));
            return ConnectQueuePairResponse.getDefaultInstance();
        });
    }

    @Override
    public void destroyQueuePair(DestroyQueuePairRequest request, StreamObserver<DestroyQueuePairResponse> response) {
        paced(response, () -> {
            queuePair(session(request.getEndpoint()), request.getQpn()).close();
            return DestroyQueuePairResponse.getDefaultInstance();
        });
    }

    @Override
    public void setQueuePairRateLimit(io.pagewire.proto.verbs.SetQueuePairRateLimitRequest request,
            StreamObserver<io.pagewire.proto.verbs.SetQueuePairRateLimitResponse> response) {
        paced(response, () -> {
            queuePair(session(request.getEndpoint()), request.getQpn()).rateLimit(request.getBytesPerSecond(), request.getBurstBytes());
            return io.pagewire.proto.verbs.SetQueuePairRateLimitResponse.getDefaultInstance();
        });
    }

    // ---- shared receive queues ----------------------------------------------------------------------

    @Override
    public void createSharedReceiveQueue(io.pagewire.proto.verbs.CreateSharedReceiveQueueRequest request,
            StreamObserver<io.pagewire.proto.verbs.CreateSharedReceiveQueueResponse> response) {
        paced(response, () -> io.pagewire.proto.verbs.CreateSharedReceiveQueueResponse.newBuilder()
                .setSrqId(session(request.getEndpoint()).endpoint.createSharedReceiveQueue().id()).build());
    }

    @Override
    public void armSharedReceiveQueue(io.pagewire.proto.verbs.ArmSharedReceiveQueueRequest request,
            StreamObserver<io.pagewire.proto.verbs.ArmSharedReceiveQueueResponse> response) {
        paced(response, () -> {
            Session session = session(request.getEndpoint());
            SharedReceiveQueue srq = sharedReceiveQueue(session, request.getSrqId());
            if (request.getLimit() > Integer.MAX_VALUE) {
                throw new IllegalArgumentException("an SRQ limit must be below 2^31, was " + request.getLimit());
            }
            srq.arm(request.getLimit(), () -> session.send(SessionEvent.newBuilder()
                    .setSrqLimitReached(io.pagewire.proto.verbs.SrqLimitReached.newBuilder().setSrqId(srq.id())).build()));
            return io.pagewire.proto.verbs.ArmSharedReceiveQueueResponse.getDefaultInstance();
        });
    }

    @Override
    public void destroySharedReceiveQueue(io.pagewire.proto.verbs.DestroySharedReceiveQueueRequest request,
            StreamObserver<io.pagewire.proto.verbs.DestroySharedReceiveQueueResponse> response) {
        paced(response, () -> {
            var dropped = io.pagewire.proto.verbs.DestroySharedReceiveQueueResponse.newBuilder();
            for (io.pagewire.node.nic.ReceiveRequest r : sharedReceiveQueue(session(request.getEndpoint()), request.getSrqId()).destroy()) {
                dropped.addDroppedWrIds(r.wrId());
            }
            return dropped.build();
        });
    }

    private static SharedReceiveQueue sharedReceiveQueue(Session session, int id) {
        SharedReceiveQueue srq = session.endpoint.sharedReceiveQueue(id);
        if (srq == null) {
            throw Status.NOT_FOUND.withDescription("shared receive queue " + id + " does not exist on " + session.endpoint).asRuntimeException();
        }
        return srq;
    }

    // ---- event counters -------------------------------------------------------------------------------

    @Override
    public void createEventCounter(CreateEventCounterRequest request, StreamObserver<CreateEventCounterResponse> response) {
        paced(response, () -> {
            EventCounter counter = session(request.getEndpoint()).endpoint.createEventCounter(access(request.getAccessList()));
            return CreateEventCounterResponse.newBuilder().setCounterId(counter.id()).build();
        });
    }

    @Override
    public void destroyEventCounter(DestroyEventCounterRequest request, StreamObserver<DestroyEventCounterResponse> response) {
        paced(response, () -> {
            Session session = session(request.getEndpoint());
            EventCounter counter = counter(session, request.getCounterId());
            session.unwatch(counter);
            session.endpoint.destroyEventCounter(counter);
            return DestroyEventCounterResponse.getDefaultInstance();
        });
    }

    @Override
    public void readEventCounter(ReadEventCounterRequest request, StreamObserver<ReadEventCounterResponse> response) {
        answer(response, () -> ReadEventCounterResponse.newBuilder()
                .setValue(counter(session(request.getEndpoint()), request.getCounterId()).value()).build());
    }

    /** Answers once the counter reaches the target, or at the timeout with its value then (see {@link CounterWait}). */
    @Override
    public void awaitEventCounter(AwaitEventCounterRequest request, StreamObserver<AwaitEventCounterResponse> response) {
        try {
            Session session = session(request.getEndpoint());
            CounterWait.start(session, counter(session, request.getCounterId()), request.getTarget(), request.getTimeoutMs(), response, scheduler);
        } catch (RuntimeException e) {
            response.onError(StatusMapping.toStatus(e));
        }
    }

    // ---- the node ---------------------------------------------------------------------------------------

    @Override
    public void describeNode(DescribeNodeRequest request, StreamObserver<DescribeNodeResponse> response) {
        answer(response, () -> DescribeNodeResponse.newBuilder()
                .setNodeId(node.id())
                .setPageSize(node.kernel().memory().pageSize())
                .setMtu(node.nic().context().mtuBytes())
                .addAllPeers(node.fabric().links().keySet())
                .setPhysicalMemoryBytes(node.kernel().context().physicalMemoryBytes())
                .setProcessCpuNs(io.pagewire.node.ProcessCpu.nanos())
                .build());
    }

    @Override
    public void readStats(ReadStatsRequest request, StreamObserver<ReadStatsResponse> response) {
        answer(response, () -> {
            ReadStatsResponse.Builder stats = ReadStatsResponse.newBuilder().setNodeId(node.id()).addAllStats(node.stats());
            if (request.getRegions()) {
                for (Endpoint endpoint : node.nic().endpoints()) {
                    for (MemoryRegion region : endpoint.regions()) {
                        stats.addRegions(regionStats(region));
                    }
                }
            }
            return stats.build();
        });
    }

    @Override
    public void readRegionStats(ReadRegionStatsRequest request, StreamObserver<RegionStats> response) {
        answer(response, () -> regionStats(region(session(request.getEndpoint()).endpoint, request.getLkey())));
    }

    private static RegionStats regionStats(MemoryRegion region) {
        RegionCounters c = region.counters();
        return RegionStats.newBuilder().setEndpointId(region.endpoint().id()).setLkey(region.lkey()).setAddress(region.address())
                .setLength(region.implicit() ? 0 : region.length()).setMode(io.pagewire.proto.verbs.RegistrationMode.valueOf(region.mode().name()))
                .setMinorFaults(c.minorFaults()).setMajorFaults(c.majorFaults()).setInvalidations(c.invalidations())
                .setPrefetchedPages(c.prefetchedPages()).setPins(c.pins()).setBytesReceived(c.bytesReceived()).setBytesSent(c.bytesSent()).build();
    }

    // ---- helpers ------------------------------------------------------------------------------------

    private Session session(EndpointRef ref) {
        Session session = sessions.get(ref.getEndpointId());
        if (session == null) {
            throw Status.NOT_FOUND.withDescription("endpoint " + ref.getEndpointId() + " is not open on node " + node.id()
                    + " (an endpoint closes when its session ends)").asRuntimeException();
        }
        if (session.key != ref.getSessionKey()) {
            throw Status.PERMISSION_DENIED.withDescription("endpoint " + ref.getEndpointId() + " on node " + node.id()
                    + " belongs to another session; use the key its SessionOpened carried").asRuntimeException();
        }
        return session;
    }

    private static QueuePair queuePair(Session session, int qpn) {
        for (QueuePair qp : session.endpoint.queuePairs()) {
            if (qp.qpn() == qpn) {
                return qp;
            }
        }
        throw Status.NOT_FOUND.withDescription("queue pair " + qpn + " does not exist on " + session.endpoint).asRuntimeException();
    }

    private static MemoryRegion region(Endpoint endpoint, int lkey) {
        MemoryRegion region = endpoint.region(lkey);
        if (region == null) {
            throw Status.NOT_FOUND.withDescription("lkey " + lkey + " is not registered on " + endpoint).asRuntimeException();
        }
        return region;
    }

    private static EventCounter counter(Session session, int id) {
        EventCounter counter = session.endpoint.eventCounter(id);
        if (counter == null) {
            throw Status.NOT_FOUND.withDescription("event counter " + id + " does not exist on " + session.endpoint).asRuntimeException();
        }
        return counter;
    }

    private static RegistrationMode mode(io.pagewire.proto.verbs.RegistrationMode mode) {
        return switch (mode) {
            case PINNED -> RegistrationMode.PINNED;
            case PIN_ON_MISS -> RegistrationMode.PIN_ON_MISS;
            case SHADOW -> RegistrationMode.SHADOW;
            case ON_DEMAND -> RegistrationMode.ON_DEMAND;
            default -> throw new IllegalArgumentException("registration mode must be PINNED, PIN_ON_MISS, SHADOW or ON_DEMAND");
        };
    }

    private static Set<Access> access(List<io.pagewire.proto.verbs.Access> rights) {
        Set<Access> access = EnumSet.noneOf(Access.class);
        for (io.pagewire.proto.verbs.Access right : rights) {
            switch (right) {
                case LOCAL_WRITE -> access.add(Access.LOCAL_WRITE);
                case REMOTE_WRITE -> access.add(Access.REMOTE_WRITE);
                case REMOTE_READ -> access.add(Access.REMOTE_READ);
                case REMOTE_ATOMIC -> access.add(Access.REMOTE_ATOMIC);
                default -> throw new IllegalArgumentException("unknown access right " + right);
            }
        }
        return access;
    }

    private static io.pagewire.proto.verbs.QpAddress address(QpAddress address) {
        return io.pagewire.proto.verbs.QpAddress.newBuilder().setNodeId(address.node()).setQpn(address.qpn())
                .setInitialCredits(address.initialCredits()).setPageSize(address.pageSize()).build();
    }

    /** Operations control calls started later than asked (their caller was over its rate). */
    public long pacedOperations() {
        return pacer.delayed();
    }

    /** Control calls refused because their caller was so far over its rate that they would wait too long. */
    public long pacingRefusals() {
        return pacer.refused();
    }

    /** Answers a control-plane call once the caller's rate allows it (see {@link ControlPacer}). */
    private <T> void paced(StreamObserver<T> response, Supplier<T> task) {
        pacedStart(response, () -> answer(response, task));
    }

    /** Starts a control-plane call's work once the caller's rate allows it, or refuses the call. */
    private void pacedStart(StreamObserver<?> response, Runnable start) {
        long wait = pacer.admit(caller());
        if (wait == 0) {
            start.run();
        } else if (wait == ControlPacer.REFUSE) {
            response.onError(overRate().asRuntimeException());
        } else {
            scheduler.schedule(() -> work.execute(start), wait, TimeUnit.NANOSECONDS);
        }
    }

    private Status overRate() {
        return Status.RESOURCE_EXHAUSTED.withDescription("this caller starts control operations (sessions, allocations, registrations,"
                + " queue pairs, counters) faster than " + node.context().controlOpsPerSecond() + " per second"
                + " (pagewire.quota.controlOpsPerSecond) for longer than its burst allows; slow down");
    }

    private static String caller() {
        String caller = CallerAuthentication.CALLER.get();
        return caller == null ? "unknown" : caller;
    }

    private static <T> void answer(StreamObserver<T> response, Supplier<T> work) {
        T result;
        try {
            result = work.get();
        } catch (RuntimeException e) {
            response.onError(StatusMapping.toStatus(e));
            return;
        }
        response.onNext(result);
        response.onCompleted();
    }

}
