package io.pagewire.client.impl;

import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.QueuePairEvent;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.SharedReceiveQueue;
import io.pagewire.client.WorkRequest;
import io.pagewire.proto.verbs.AllocateRequest;
import io.pagewire.proto.verbs.AllocateResponse;
import io.pagewire.proto.verbs.AttachRings;
import io.pagewire.proto.verbs.CreateEventCounterRequest;
import io.pagewire.proto.verbs.CreateEventCounterResponse;
import io.pagewire.proto.verbs.CreateQueuePairRequest;
import io.pagewire.proto.verbs.CreateQueuePairResponse;
import io.pagewire.proto.verbs.CreateSharedReceiveQueueRequest;
import io.pagewire.proto.verbs.CreateSharedReceiveQueueResponse;
import io.pagewire.proto.verbs.Doorbell;
import io.pagewire.proto.verbs.EndpointRef;
import io.pagewire.proto.verbs.FreeRequest;
import io.pagewire.proto.verbs.FreeResponse;
import io.pagewire.proto.verbs.OpenSession;
import io.pagewire.proto.verbs.PageOutRequest;
import io.pagewire.proto.verbs.PageOutResponse;
import io.pagewire.proto.verbs.PostReceiveRequest;
import io.pagewire.proto.verbs.PostRequest;
import io.pagewire.proto.verbs.ReceiveRequest;
import io.pagewire.proto.verbs.RegisterRegionRequest;
import io.pagewire.proto.verbs.RegisterRegionResponse;
import io.pagewire.proto.verbs.RingsActive;
import io.pagewire.proto.verbs.RingsAttached;
import io.pagewire.proto.verbs.RingsOffered;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.WatchCounter;
import io.pagewire.ring.MemoryFile;
import io.pagewire.ring.PageTableFile;
import io.pagewire.ring.RingBell;
import io.pagewire.ring.SessionRings;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.LongConsumer;

/**
 * {@link Endpoint} over gRPC. Its session stream is the endpoint's life: it carries posts out and
 * completions, refusals and counter changes back. Each posted request gets a fresh work request id
 * and a future that the matching completion settles.
 */
final class GrpcEndpoint implements Endpoint {
    private final GrpcPagewire connection;
    private final CompletableFuture<GrpcEndpoint> opened = new CompletableFuture<>();
    /** Settles when the node ends the session stream, which it does after closing the endpoint. */
    private final CompletableFuture<Void> streamEnded = new CompletableFuture<>();
    /** Posted requests and receives waiting for their outcome. */
    private final PendingCompletions pending = new PendingCompletions();
    private final Map<Integer, GrpcSharedReceiveQueue> sharedReceiveQueues = new ConcurrentHashMap<>();
    private final Map<Integer, Consumer<QueuePairEvent>> queuePairListeners = new ConcurrentHashMap<>();
    private final Map<Integer, List<LongConsumer>> watchers = new ConcurrentHashMap<>();
    /** Waits on this endpoint's event counters not yet settled: the session's end fails them. */
    private final Set<CompletableFuture<Long>> counterWaits = ConcurrentHashMap.newKeySet();
    private ClientCallStreamObserver<SessionRequest> session;
    private volatile EndpointRef ref;
    private volatile String nodeId;
    private volatile int pageSize;
    private volatile boolean closed;
    /** The session's rings once the node switched to them; null while everything uses the stream. */
    private volatile RingClient rings;
    /** The endpoint's memory as this process reaches it: directly where the node shares it, else by calls. */
    private final EndpointMemory memory;
    /** CPU faults raised on the ring and not answered yet, by token. */
    private final Map<Long, CompletableFuture<Void>> faults = new ConcurrentHashMap<>();
    private final AtomicLong nextFaultToken = new AtomicLong(1);
    private SessionRings offeredRings;

    GrpcEndpoint(GrpcPagewire connection, String name) {
        this.connection = connection;
        this.memory = new EndpointMemory(connection);
        connection.sessionStub().session(new ClientResponseObserver<SessionRequest, SessionEvent>() {
            @Override
            public void beforeStart(ClientCallStreamObserver<SessionRequest> requestStream) {
                session = requestStream;
            }

            @Override
            public void onNext(SessionEvent event) {
                handle(event);
            }

            @Override
            public void onError(Throwable t) {
                ended(Errors.fromStatus(t, connection.target()));
            }

            @Override
            public void onCompleted() {
                ended(new PagewireException.UnavailableException("the session with " + connection.target() + " ended", null));
            }
        });
        try {
            send(SessionRequest.newBuilder().setOpen(OpenSession.newBuilder().setName(name == null ? "" : name)).build());
        } catch (PagewireException.UnavailableException e) {
            if (!opened.isCompletedExceptionally()) {
                throw e;
            }
            // The node refused the stream (a wrong token, say) before the open went out: opened() carries its reason.
        }
    }

    CompletableFuture<GrpcEndpoint> opened() {
        return opened;
    }

    GrpcPagewire connection() {
        return connection;
    }

    EndpointRef ref() {
        return ref;
    }

    private void handle(SessionEvent event) {
        switch (event.getEventCase()) {
            case OPENED -> {
                ref = EndpointRef.newBuilder().setEndpointId(event.getOpened().getEndpointId())
                        .setSessionKey(event.getOpened().getSessionKey()).build();
                memory.opened(ref);
                nodeId = event.getOpened().getNodeId();
                pageSize = event.getOpened().getPageSize();
                if (connection.options().sharedMemory()) {
                    send(SessionRequest.newBuilder().setAttachRings(AttachRings.getDefaultInstance()).build());
                } else {
                    opened.complete(this);
                }
            }
            case RINGS_OFFERED -> attach(event.getRingsOffered());
            case DOORBELL -> {
                RingClient r = rings;
                if (r != null) {
                    r.wake();
                }
            }
            case RINGS_ACTIVE -> {
                SessionRings mapped = offeredRings;
                offeredRings = null;
                if (mapped != null) {
                    rings = new RingClient(mapped, ringEvents(), this::ringNode, connection.options().busyPoll(),
                            connection.options().ringSleepLimit().toNanos(),
                            "pagewire-sdk-rings-" + ref.getEndpointId(), RingBell.connect(mapped.path()));
                    memory.direct(mapMemory(event.getRingsActive()), rings);
                }
                opened.complete(this);
            }
            case COMPLETION -> pending.completed(event.getCompletion());
            case COMPLETIONS -> event.getCompletions().getCompletionsList().forEach(pending::completed);
            case REFUSED -> pending.refused(event.getRefused().getWrId(), event.getRefused().getCode(), event.getRefused().getError());
            case COUNTER -> counterChanged(event.getCounter().getCounterId(), event.getCounter().getValue());
            case WATCH_REFUSED -> {
                // The counter is gone (destroyed while the watch was on its way): its handlers will never run.
                watchers.remove(event.getWatchRefused().getCounterId());
                System.getLogger(GrpcEndpoint.class.getName()).log(System.Logger.Level.WARNING, "endpoint " + ref.getEndpointId()
                        + ": the node refused a watch of counter " + event.getWatchRefused().getCounterId() + ": " + event.getWatchRefused().getError());
            }
            case QUEUE_PAIR_EVENT -> {
                Consumer<QueuePairEvent> listener = queuePairListeners.get(event.getQueuePairEvent().getQpn());
                QueuePairEvent kind = switch (event.getQueuePairEvent().getKind()) {
                    case FATAL -> QueuePairEvent.FATAL;
                    case COMMUNICATION_ESTABLISHED -> QueuePairEvent.COMMUNICATION_ESTABLISHED;
                    case LAST_WQE_REACHED -> QueuePairEvent.LAST_WQE_REACHED;
                    case SEND_QUEUE_DRAINED -> QueuePairEvent.SEND_QUEUE_DRAINED;
                    default -> null; // a kind this SDK does not know: a newer node
                };
                if (listener != null && kind != null) {
                    listener.accept(kind);
                }
            }
            case SRQ_LIMIT_REACHED -> {
                GrpcSharedReceiveQueue srq = sharedReceiveQueues.get(event.getSrqLimitReached().getSrqId());
                if (srq != null) {
                    srq.limitReached();
                }
            }
            default -> {
            }
        }
    }

    /** Maps the offered ring file and proves it with the nonce, or tells the node it cannot. */
    private void attach(RingsOffered offer) {
        if (offer.getPath().isEmpty()) {
            opened.complete(this); // the node offers none; the stream carries everything
            return;
        }
        RingsAttached.Builder answer = RingsAttached.newBuilder();
        try {
            offeredRings = SessionRings.open(Path.of(offer.getPath()));
            answer.setNonce(offeredRings.nonce());
        } catch (IOException | RuntimeException e) {
            answer.setFailure("cannot map " + offer.getPath() + ": " + e.getMessage());
        }
        send(SessionRequest.newBuilder().setRingsAttached(answer).build());
        if (offeredRings == null) {
            opened.complete(this);
        }
    }

    /** Maps the node's memory and this endpoint's page table, when the node shares them; null otherwise. */
    private CpuMemory mapMemory(RingsActive active) {
        if (active.getMemoryPath().isEmpty()) {
            return null;
        }
        try {
            return new CpuMemory(MemoryFile.open(Path.of(active.getMemoryPath())), PageTableFile.open(Path.of(active.getPageTablePath())),
                    active.getCpuSlot(), this::cpuFault);
        } catch (IOException | RuntimeException e) {
            System.getLogger(GrpcEndpoint.class.getName()).log(System.Logger.Level.WARNING, "endpoint " + ref.getEndpointId()
                    + ": cannot map the node's memory (" + e.getMessage() + "); store and load stay calls");
            return null;
        }
    }

    /** A CPU fault: asks the node on the ring to bring the pages in, and waits for its answer. */
    private void cpuFault(long address, int length, boolean write) {
        RingClient r = rings;
        if (r == null || closed) {
            throw new PagewireException.UnavailableException("endpoint " + this + " is closed", null);
        }
        long token = nextFaultToken.getAndIncrement();
        CompletableFuture<Void> served = new CompletableFuture<>();
        faults.put(token, served);
        try {
            long deadlineNs = System.nanoTime() + connection.options().deadline().toNanos();
            r.fault(token, address, length, write, deadlineNs);
            if (connection.options().busyPoll()) {
                while (!served.isDone() && System.nanoTime() - deadlineNs < 0) {
                    if (r.poll() == 0) {
                        Thread.onSpinWait();
                    }
                }
            } else {
                awaitEvents(served, deadlineNs);
            }
            if (!served.isDone()) {
                throw new PagewireException.UnavailableException(String.format("node %s did not serve a CPU fault at 0x%x within %s",
                        nodeId, address, connection.options().deadline()), null);
            }
            join(served);
        } finally {
            faults.remove(token);
        }
    }

    private void faultServed(long token, int status, String error) {
        CompletableFuture<Void> served = faults.remove(token);
        if (served == null) {
            return;
        }
        if (status == 0) {
            served.complete(null);
        } else {
            served.completeExceptionally(Errors.fromStatus(Status.fromCodeValue(status).withDescription(error).asRuntimeException(),
                    connection.target()));
        }
    }

    private RingClient.Events ringEvents() {
        return new RingClient.Events() {
            @Override
            public void completed(long wrId, int qpn, int opcode, int status, long bytes, long value, String error, boolean hasImmediate,
                    int immediate) {
                pending.completed(wrId, qpn, opcode, status, bytes, value, error, hasImmediate, immediate);
            }

            @Override
            public void refused(int qpn, long wrId, int code, String error) {
                pending.refused(wrId, code, error);
            }

            @Override
            public void counterChanged(int counterId, long value) {
                GrpcEndpoint.this.counterChanged(counterId, value);
            }

            @Override
            public void faultServed(long token, int status, String error) {
                GrpcEndpoint.this.faultServed(token, status, error);
            }
        };
    }

    private static final SessionRequest DOORBELL = SessionRequest.newBuilder().setDoorbell(Doorbell.getDefaultInstance()).build();

    /** Wakes the node's ring agent, which sleeps: a post is waiting on the request ring. */
    private void ringNode() {
        try {
            send(DOORBELL);
        } catch (RuntimeException e) {
            // The session ended; the post fails with it.
        }
    }

    /** Whether posts and completions travel on shared-memory rings. */
    boolean usesRings() {
        return rings != null;
    }

    @Override
    public int poll() {
        RingClient r = rings;
        return r == null ? 0 : r.poll();
    }

    /**
     * Blocks until {@code future} is done (its outcome is for the caller to read) or the deadline
     * ({@link RingClient#NO_DEADLINE} for none) passes; returns at once when the session has no rings
     * (the caller then joins the future). On shared-memory rings the waiting thread handles the session's events itself and
     * sleeps on the session's bell ({@link RingClient#await}); otherwise it waits on the future.
     */
    void awaitEvents(CompletableFuture<?> future, long deadlineNs) {
        RingClient r = rings;
        if (r != null && !future.isDone()) {
            r.await(future, deadlineNs);
        }
    }

    /** Fails the futures of receives the node dropped (their shared receive queue was destroyed). */
    void dropped(List<Long> wrIds, String reason) {
        pending.dropped(wrIds, reason);
    }

    private void counterChanged(int counterId, long value) {
        List<LongConsumer> handlers = watchers.get(counterId);
        if (handlers != null) {
            for (LongConsumer handler : handlers) {
                handler.accept(value);
            }
        }
    }

    private void ended(PagewireException error) {
        closed = true;
        RingClient r = rings;
        if (r != null) {
            r.close();
        }
        streamEnded.complete(null);
        opened.completeExceptionally(error);
        pending.sessionEnded(error);
        for (CompletableFuture<Void> fault : List.copyOf(faults.values())) {
            fault.completeExceptionally(new PagewireException.UnavailableException(
                    "the session ended before the node served a CPU fault: " + error.getMessage(), error));
        }
        for (CompletableFuture<Long> wait : List.copyOf(counterWaits)) {
            wait.completeExceptionally(new PagewireException.UnavailableException(
                    "the session ended before the event counter reached its target: " + error.getMessage(), error));
        }
        connection.forget(this);
    }

    /** Whether the endpoint is closed or closing (its session ended or is ending). */
    boolean isClosed() {
        return closed;
    }

    /** Fails {@code wait} if the session ends before it is settled. */
    void waiting(CompletableFuture<Long> wait) {
        counterWaits.add(wait);
        wait.whenComplete((value, error) -> counterWaits.remove(wait));
        // ended() completes streamEnded before it walks the waits: either it sees this one or this sees it done.
        if (streamEnded.isDone()) {
            wait.completeExceptionally(new PagewireException.UnavailableException("endpoint " + ref.getEndpointId() + " on "
                    + connection.target() + " is closed", null));
        }
    }

    private synchronized void send(SessionRequest request) {
        if (closed) {
            throw new PagewireException.UnavailableException("endpoint " + (ref == null ? "" : ref.getEndpointId() + " ")
                    + "on " + connection.target() + " is closed", null);
        }
        session.onNext(request);
    }

    /** Posts work requests of one queue pair; returns one future per request. */
    List<CompletableFuture<Completion>> post(int qpn, List<WorkRequest> requests) {
        PostOrder order = pending.order(qpn);
        long[] wrIds = new long[requests.size()];
        List<CompletableFuture<Completion>> futures;
        synchronized (order.postLock) {
            futures = pending.expect(order, requests, wrIds);
            try {
                RingClient r = rings;
                if (r == null) {
                    send(SessionRequest.newBuilder().setPost(postMessage(qpn, requests, wrIds)).build());
                } else if (closed) {
                    throw new PagewireException.UnavailableException("endpoint " + ref.getEndpointId() + " on " + connection.target()
                            + " is closed", null);
                } else {
                    r.post(qpn, requests, wrIds, System.nanoTime() + connection.options().deadline().toNanos());
                }
            } catch (RuntimeException e) {
                pending.failed(wrIds, e);
            }
        }
        return futures;
    }

    /** Posts a receive buffer to a queue pair, or to a shared receive queue when srqId is set; its future settles with the receive's completion. */
    CompletableFuture<Completion> postReceive(int qpn, int srqId, MemoryRegion region, long address, int length) {
        long wrId = pending.nextReceiveId();
        CompletableFuture<Completion> future = pending.receive(wrId);
        try {
            RingClient r = rings;
            if (r != null) {
                r.postReceive(qpn, srqId, wrId, region.lkey(), address, length, System.nanoTime() + connection.options().deadline().toNanos());
                return future;
            }
            send(SessionRequest.newBuilder().setPostReceive(PostReceiveRequest.newBuilder().setQpn(qpn).setSrqId(srqId)
                    .addReceives(ReceiveRequest.newBuilder().setWrId(wrId).setLkey(region.lkey())
                            .setAddress(address).setLength(length))).build());
        } catch (RuntimeException e) {
            pending.failed(new long[] {wrId}, e);
        }
        return future;
    }

    private static PostRequest.Builder postMessage(int qpn, List<WorkRequest> requests, long[] wrIds) {
        PostRequest.Builder post = PostRequest.newBuilder().setQpn(qpn);
        for (int i = 0; i < wrIds.length; i++) {
            WorkRequest wr = requests.get(i);
            post.addRequests(io.pagewire.proto.verbs.WorkRequest.newBuilder()
                    .setWrId(wrIds[i])
                    .setOpcodeValue(WireOpcodes.toWire(wr.opcode()))
                    .setLkey(wr.local() == null ? 0 : wr.local().lkey())
                    .setLocalAddress(wr.localAddress())
                    .setLength(wr.length())
                    .setRemoteAddress(wr.remoteAddress())
                    .setRkey(wr.rkey())
                    .setCounterId(wr.counterId())
                    .setAdd(wr.add())
                    .setUnsignaled(!wr.signaled())
                    .setImmediate(wr.immediate())
                    .setSwap(wr.swap())
                    .setFence(wr.fence())
                    .setSolicited(wr.solicited()));
        }
        return post;
    }

    /** Sets (null: removes) who hears queue pair {@code qpn}'s events. */
    void listen(int qpn, Consumer<QueuePairEvent> listener) {
        if (listener == null) {
            queuePairListeners.remove(qpn);
        } else {
            queuePairListeners.put(qpn, listener);
        }
    }

    /** The queue pair is gone: its post order with it. */
    void forget(int qpn) {
        pending.forget(qpn);
    }

    AutoCloseable watch(int counterId, LongConsumer handler) {
        boolean first = watchers.computeIfAbsent(counterId, id -> new CopyOnWriteArrayList<>()).isEmpty();
        watchers.get(counterId).add(handler);
        if (first) {
            send(SessionRequest.newBuilder().setWatch(WatchCounter.newBuilder().setCounterId(counterId)).build());
        }
        return () -> {
            List<LongConsumer> handlers = watchers.get(counterId);
            if (handlers != null && handlers.remove(handler) && handlers.isEmpty() && !closed) {
                send(SessionRequest.newBuilder().setWatch(WatchCounter.newBuilder().setCounterId(counterId).setStop(true)).build());
            }
        };
    }

    <T> T join(CompletableFuture<T> future) {
        return connection.join(future);
    }

    // ---- Endpoint ------------------------------------------------------------------------------------

    @Override
    public int id() {
        return ref.getEndpointId();
    }

    @Override
    public String nodeId() {
        return nodeId;
    }

    @Override
    public int pageSize() {
        return pageSize;
    }

    @Override
    public long allocate(long length) {
        return join(allocateAsync(length));
    }

    @Override
    public CompletableFuture<Long> allocateAsync(long length) {
        return Calls.<AllocateResponse>unary(o -> connection.stub().allocate(
                AllocateRequest.newBuilder().setEndpoint(ref).setLength(length).build(), o)).thenApply(r -> r.getAddress());
    }

    @Override
    public void free(long address) {
        join(freeAsync(address));
    }

    @Override
    public int pageOut(long address, long length) {
        return join(Calls.<PageOutResponse>unary(o -> connection.stub().pageOut(
                PageOutRequest.newBuilder().setEndpoint(ref).setAddress(address).setLength(length).build(), o)))
                .getPages();
    }

    @Override
    public CompletableFuture<Void> freeAsync(long address) {
        return Calls.<FreeResponse>unary(o -> connection.stub().free(
                FreeRequest.newBuilder().setEndpoint(ref).setAddress(address).build(), o)).thenApply(r -> null);
    }

    @Override
    public boolean sharesMemory() {
        return memory.sharesMemory();
    }

    @Override
    public void store(long address, byte[] data) {
        memory.store(address, data);
    }

    @Override
    public void store(long address, ByteBuffer src) {
        memory.store(address, src);
    }

    @Override
    public void load(long address, ByteBuffer dst) {
        memory.load(address, dst);
    }

    @Override
    public long loadLong(long address) {
        return memory.loadLong(address);
    }

    @Override
    public void storeLong(long address, long value) {
        memory.storeLong(address, value);
    }

    @Override
    public long compareAndSwapLong(long address, long expected, long value) {
        return memory.compareAndSwapLong(address, expected, value);
    }

    @Override
    public long fetchAddLong(long address, long delta) {
        return memory.fetchAddLong(address, delta);
    }

    @Override
    public long awaitChange(long address, long value, Duration timeout) {
        return memory.awaitChange(address, value, timeout);
    }

    @Override
    public CompletableFuture<Void> storeAsync(long address, byte[] data) {
        return memory.storeAsync(address, data);
    }

    @Override
    public byte[] load(long address, int length) {
        return memory.load(address, length);
    }

    @Override
    public CompletableFuture<byte[]> loadAsync(long address, int length) {
        return memory.loadAsync(address, length);
    }

    @Override
    public MemoryRegion register(long address, long length, RegistrationMode mode, Set<Access> access) {
        return join(registerAsync(address, length, mode, access));
    }

    @Override
    public CompletableFuture<MemoryRegion> registerAsync(long address, long length, RegistrationMode mode, Set<Access> access) {
        RegisterRegionRequest.Builder request = RegisterRegionRequest.newBuilder().setEndpoint(ref).setAddress(address).setLength(length)
                .setMode(io.pagewire.proto.verbs.RegistrationMode.valueOf(mode.name()));
        access.forEach(a -> request.addAccess(io.pagewire.proto.verbs.Access.valueOf(a.name())));
        return Calls.<RegisterRegionResponse>unary(o -> connection.stub().registerRegion(request.build(), o))
                .thenApply(r -> new GrpcMemoryRegion(this, r.getAddress(), r.getLength(), mode, EnumSet.copyOf(withNone(access)),
                        r.getLkey(), r.getRkey()));
    }

    @Override
    public MemoryRegion registerImplicit(Set<Access> access) {
        RegisterRegionRequest.Builder request = RegisterRegionRequest.newBuilder().setEndpoint(ref).setImplicit(true)
                .setMode(io.pagewire.proto.verbs.RegistrationMode.ON_DEMAND);
        access.forEach(a -> request.addAccess(io.pagewire.proto.verbs.Access.valueOf(a.name())));
        var r = join(Calls.<RegisterRegionResponse>unary(o -> connection.stub().registerRegion(request.build(), o)));
        return new GrpcMemoryRegion(this, r.getAddress(), r.getLength(), RegistrationMode.ON_DEMAND, EnumSet.copyOf(withNone(access)),
                r.getLkey(), r.getRkey());
    }

    private static Set<Access> withNone(Set<Access> access) {
        return access.isEmpty() ? EnumSet.noneOf(Access.class) : access;
    }

    @Override
    public QueuePair createQueuePair() {
        return join(createQueuePairAsync());
    }

    @Override
    public CompletableFuture<QueuePair> createQueuePairAsync() {
        return Calls.<CreateQueuePairResponse>unary(o -> connection.stub().createQueuePair(
                CreateQueuePairRequest.newBuilder().setEndpoint(ref).build(), o)).thenApply(r -> new GrpcQueuePair(this, r.getAddress()));
    }

    @Override
    public QueuePair createQueuePair(SharedReceiveQueue srq) {
        return join(Calls.<CreateQueuePairResponse>unary(o -> connection.stub().createQueuePair(
                CreateQueuePairRequest.newBuilder().setEndpoint(ref).setSrqId(srq.id()).build(), o))
                .thenApply(r -> new GrpcQueuePair(this, r.getAddress())));
    }

    @Override
    public SharedReceiveQueue createSharedReceiveQueue() {
        int id = join(Calls.<CreateSharedReceiveQueueResponse>unary(o -> connection.stub().createSharedReceiveQueue(
                CreateSharedReceiveQueueRequest.newBuilder().setEndpoint(ref).build(), o))).getSrqId();
        GrpcSharedReceiveQueue srq = new GrpcSharedReceiveQueue(this, id);
        sharedReceiveQueues.put(id, srq);
        return srq;
    }

    void forget(GrpcSharedReceiveQueue srq) {
        sharedReceiveQueues.remove(srq.id(), srq);
    }

    @Override
    public QueuePair connect(Endpoint remote) {
        QueuePair local = createQueuePair();
        QueuePair far = remote.createQueuePair();
        local.connect(far.address());
        far.connect(local.address());
        return local;
    }

    @Override
    public EventCounter createEventCounter(Set<Access> access) {
        return join(createEventCounterAsync(access));
    }

    @Override
    public CompletableFuture<EventCounter> createEventCounterAsync(Set<Access> access) {
        CreateEventCounterRequest.Builder request = CreateEventCounterRequest.newBuilder().setEndpoint(ref);
        access.forEach(a -> request.addAccess(io.pagewire.proto.verbs.Access.valueOf(a.name())));
        return Calls.<CreateEventCounterResponse>unary(o -> connection.stub().createEventCounter(request.build(), o))
                .thenApply(r -> new GrpcEventCounter(this, r.getCounterId()));
    }

    /**
     * Ends the session and waits (up to ten seconds) until the node has closed the endpoint, so that
     * its pins and memory are released when this returns.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (!closed) {
                closed = true;
                try {
                    session.onCompleted();
                } catch (RuntimeException ignored) {
                    // Already gone.
                }
            }
        }
        try {
            streamEnded.get(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException e) {
            session.cancel("closing endpoint", null);
        }
        ended(new PagewireException.UnavailableException("endpoint closed", null));
    }

    @Override
    public String toString() {
        return "endpoint " + (ref == null ? "?" : ref.getEndpointId()) + " on " + nodeId;
    }
}
