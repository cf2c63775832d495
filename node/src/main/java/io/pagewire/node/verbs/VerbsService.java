package io.pagewire.node.verbs;

import io.grpc.stub.StreamObserver;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.loop.NodeEventLoops;
import io.pagewire.node.nic.Nic;
import io.pagewire.proto.verbs.AttachMulticastRequest;
import io.pagewire.proto.verbs.AttachMulticastResponse;
import io.pagewire.proto.verbs.AtomicWordRequest;
import io.pagewire.proto.verbs.AtomicWordResponse;
import io.pagewire.proto.verbs.AdviseRequest;
import io.pagewire.proto.verbs.AdviseResponse;
import io.pagewire.proto.verbs.AllocateRequest;
import io.pagewire.proto.verbs.AllocateResponse;
import io.pagewire.proto.verbs.ArmSharedReceiveQueueRequest;
import io.pagewire.proto.verbs.ArmSharedReceiveQueueResponse;
import io.pagewire.node.cm.ConnectionManager;
import io.pagewire.proto.verbs.AwaitEventCounterRequest;
import io.pagewire.proto.verbs.AwaitEventCounterResponse;
import io.pagewire.proto.verbs.ConnectQueuePairRequest;
import io.pagewire.proto.verbs.ConnectQueuePairResponse;
import io.pagewire.proto.verbs.CmCallRequest;
import io.pagewire.proto.verbs.CmCallResponse;
import io.pagewire.proto.verbs.CmChannelRequest;
import io.pagewire.proto.verbs.CmEvent;
import io.pagewire.proto.verbs.CreateEventCounterRequest;
import io.pagewire.proto.verbs.CreateEventCounterResponse;
import io.pagewire.proto.verbs.CreateQueuePairRequest;
import io.pagewire.proto.verbs.CreateQueuePairResponse;
import io.pagewire.proto.verbs.CreateSharedReceiveQueueRequest;
import io.pagewire.proto.verbs.CreateSharedReceiveQueueResponse;
import io.pagewire.proto.verbs.DeregisterRegionRequest;
import io.pagewire.proto.verbs.DeregisterRegionResponse;
import io.pagewire.proto.verbs.DescribeNodeRequest;
import io.pagewire.proto.verbs.DescribeNodeResponse;
import io.pagewire.proto.verbs.DestroyEventCounterRequest;
import io.pagewire.proto.verbs.DestroyEventCounterResponse;
import io.pagewire.proto.verbs.AllocateWindowRequest;
import io.pagewire.proto.verbs.AllocateWindowResponse;
import io.pagewire.proto.verbs.DeallocateWindowRequest;
import io.pagewire.proto.verbs.DeallocateWindowResponse;
import io.pagewire.proto.verbs.DestroyQueuePairRequest;
import io.pagewire.proto.verbs.ModifyQueuePairRequest;
import io.pagewire.proto.verbs.ModifyQueuePairResponse;
import io.pagewire.proto.verbs.DestroyQueuePairResponse;
import io.pagewire.proto.verbs.DestroySharedReceiveQueueRequest;
import io.pagewire.proto.verbs.DestroySharedReceiveQueueResponse;
import io.pagewire.proto.verbs.FreeRequest;
import io.pagewire.proto.verbs.FreeResponse;
import io.pagewire.proto.verbs.LoadRequest;
import io.pagewire.proto.verbs.MapCpuPagesRequest;
import io.pagewire.proto.verbs.MapCpuPagesResponse;
import io.pagewire.proto.verbs.LoadResponse;
import io.pagewire.proto.verbs.PageOutRequest;
import io.pagewire.proto.verbs.PageOutResponse;
import io.pagewire.proto.verbs.ReadEventCounterRequest;
import io.pagewire.proto.verbs.ReadEventCounterResponse;
import io.pagewire.proto.verbs.ReadRegionStatsRequest;
import io.pagewire.proto.verbs.ReadStatsRequest;
import io.pagewire.proto.verbs.ReadStatsResponse;
import io.pagewire.proto.verbs.RegionStats;
import io.pagewire.proto.verbs.RegisterRegionRequest;
import io.pagewire.proto.verbs.RegisterRegionResponse;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.SessionRequest;
import io.pagewire.proto.verbs.SetQueuePairRateLimitRequest;
import io.pagewire.proto.verbs.SetQueuePairRateLimitResponse;
import io.pagewire.proto.verbs.Stat;
import io.pagewire.proto.verbs.StoreRequest;
import io.pagewire.proto.verbs.StoreResponse;
import io.pagewire.proto.verbs.VerbsGrpc;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.ScheduledExecutorService;
import java.util.function.Supplier;

/**
 * The service applications use to drive a node, as gRPC sees it: each call goes to the part that
 * serves its concern (the {@link SessionStream}, {@link MemoryCalls}, {@link QueuePairCalls},
 * {@link CounterCalls}, {@link NodeCalls}). Every call is checked against the session that owns the
 * endpoint it names; every failure becomes a status whose description says what to fix; no call blocks
 * a thread while it waits.
 */
public final class VerbsService extends VerbsGrpc.VerbsImplBase implements AutoCloseable {
    private final Sessions sessions;
    private final ControlCalls control;
    private final SessionStream stream;
    private final MemoryCalls memory;
    private final QueuePairCalls queuePairs;
    private final CounterCalls counters;
    private final NodeCalls node;
    private final CmCalls cm;

    /**
     * @param busyPollNs the node's latency mode (0: off): how long its loops, ring readers included, poll before they block
     * @param stats the node's meters, as ReadStats answers them
     * @param scheduler where paced operations and counter waits are timed
     * @param work where paced operations run once their wait is over (the pool unary calls run on)
     * @param sharedFiles where sessions' rings and page tables are made (the node's owner directory); null: no rings
     * @param connections the node's connection manager, which the rdma_cm calls drive
     */
    public VerbsService(String nodeId, VerbsContext context, Nic nic, Fabric fabric, NodeEventLoops loops, long busyPollNs,
            Supplier<List<Stat>> stats, ScheduledExecutorService scheduler, Executor work, Path sharedFiles, ConnectionManager connections) {
        this.sessions = new Sessions(nodeId, context, nic.kernel().context().callerShare());
        this.control = new ControlCalls(context, scheduler, work);
        this.stream = new SessionStream(nodeId, context, nic, sessions, control, loops, busyPollNs, work, sharedFiles,
                new LidDirectory(nodeId, fabric));
        this.memory = new MemoryCalls(context, sessions, control);
        this.queuePairs = new QueuePairCalls(nodeId, nic, fabric, sessions, control);
        this.counters = new CounterCalls(sessions, control, scheduler);
        this.node = new NodeCalls(nodeId, nic, fabric, sessions, stats, connections == null ? new byte[0] : connections.address());
        this.cm = new CmCalls(connections);
    }

    /** Sessions open now. */
    public int sessionCount() {
        return sessions.count();
    }

    /** Open sessions whose application attached shared-memory rings. */
    public int sessionsOnRings() {
        return sessions.onRings();
    }

    /** Control-plane operations started later than asked (their caller was over its rate). */
    public long pacedOperations() {
        return control.delayed();
    }

    /** Control calls refused because their caller was so far over its rate that they would wait too long. */
    public long pacingRefusals() {
        return control.refused();
    }

    /** Ends every session (the node is shutting down): streams complete, endpoints close, rings go. */
    @Override
    public void close() {
        sessions.closeAll();
        stream.close();
    }

    @Override
    public StreamObserver<SessionRequest> session(StreamObserver<SessionEvent> responseObserver) {
        return stream.open(responseObserver);
    }

    @Override
    public StreamObserver<CmChannelRequest> cmChannel(StreamObserver<CmEvent> responseObserver) {
        return cm.open(responseObserver);
    }

    @Override
    public void cmCall(CmCallRequest request, StreamObserver<CmCallResponse> response) {
        cm.call(request, response);
    }

    @Override
    public void allocate(AllocateRequest request, StreamObserver<AllocateResponse> response) {
        memory.allocate(request, response);
    }

    @Override
    public void free(FreeRequest request, StreamObserver<FreeResponse> response) {
        memory.free(request, response);
    }

    @Override
    public void mapCpuPages(MapCpuPagesRequest request, StreamObserver<MapCpuPagesResponse> response) {
        memory.mapCpuPages(request, response);
    }

    @Override
    public void pageOut(PageOutRequest request, StreamObserver<PageOutResponse> response) {
        memory.pageOut(request, response);
    }

    @Override
    public void store(StoreRequest request, StreamObserver<StoreResponse> response) {
        memory.store(request, response);
    }

    @Override
    public void load(LoadRequest request, StreamObserver<LoadResponse> response) {
        memory.load(request, response);
    }

    @Override
    public void atomicWord(AtomicWordRequest request, StreamObserver<AtomicWordResponse> response) {
        memory.atomicWord(request, response);
    }

    @Override
    public void registerRegion(RegisterRegionRequest request, StreamObserver<RegisterRegionResponse> response) {
        memory.registerRegion(request, response);
    }

    @Override
    public void deregisterRegion(DeregisterRegionRequest request, StreamObserver<DeregisterRegionResponse> response) {
        memory.deregisterRegion(request, response);
    }

    @Override
    public void allocateWindow(AllocateWindowRequest request, StreamObserver<AllocateWindowResponse> response) {
        memory.allocateWindow(request, response);
    }

    @Override
    public void deallocateWindow(DeallocateWindowRequest request, StreamObserver<DeallocateWindowResponse> response) {
        memory.deallocateWindow(request, response);
    }

    @Override
    public void advise(AdviseRequest request, StreamObserver<AdviseResponse> response) {
        memory.advise(request, response);
    }

    @Override
    public void createQueuePair(CreateQueuePairRequest request, StreamObserver<CreateQueuePairResponse> response) {
        queuePairs.createQueuePair(request, response);
    }

    @Override
    public void connectQueuePair(ConnectQueuePairRequest request, StreamObserver<ConnectQueuePairResponse> response) {
        queuePairs.connectQueuePair(request, response);
    }

    @Override
    public void modifyQueuePair(ModifyQueuePairRequest request, StreamObserver<ModifyQueuePairResponse> response) {
        queuePairs.modifyQueuePair(request, response);
    }

    @Override
    public void destroyQueuePair(DestroyQueuePairRequest request, StreamObserver<DestroyQueuePairResponse> response) {
        queuePairs.destroyQueuePair(request, response);
    }

    @Override
    public void attachMulticast(AttachMulticastRequest request, StreamObserver<AttachMulticastResponse> response) {
        queuePairs.attachMulticast(request, response);
    }

    @Override
    public void setQueuePairRateLimit(SetQueuePairRateLimitRequest request, StreamObserver<SetQueuePairRateLimitResponse> response) {
        queuePairs.setQueuePairRateLimit(request, response);
    }

    @Override
    public void createSharedReceiveQueue(CreateSharedReceiveQueueRequest request, StreamObserver<CreateSharedReceiveQueueResponse> response) {
        queuePairs.createSharedReceiveQueue(request, response);
    }

    @Override
    public void armSharedReceiveQueue(ArmSharedReceiveQueueRequest request, StreamObserver<ArmSharedReceiveQueueResponse> response) {
        queuePairs.armSharedReceiveQueue(request, response);
    }

    @Override
    public void destroySharedReceiveQueue(DestroySharedReceiveQueueRequest request, StreamObserver<DestroySharedReceiveQueueResponse> response) {
        queuePairs.destroySharedReceiveQueue(request, response);
    }

    @Override
    public void createEventCounter(CreateEventCounterRequest request, StreamObserver<CreateEventCounterResponse> response) {
        counters.createEventCounter(request, response);
    }

    @Override
    public void destroyEventCounter(DestroyEventCounterRequest request, StreamObserver<DestroyEventCounterResponse> response) {
        counters.destroyEventCounter(request, response);
    }

    @Override
    public void readEventCounter(ReadEventCounterRequest request, StreamObserver<ReadEventCounterResponse> response) {
        counters.readEventCounter(request, response);
    }

    @Override
    public void awaitEventCounter(AwaitEventCounterRequest request, StreamObserver<AwaitEventCounterResponse> response) {
        counters.awaitEventCounter(request, response);
    }

    @Override
    public void describeNode(DescribeNodeRequest request, StreamObserver<DescribeNodeResponse> response) {
        node.describeNode(request, response);
    }

    @Override
    public void readStats(ReadStatsRequest request, StreamObserver<ReadStatsResponse> response) {
        node.readStats(request, response);
    }

    @Override
    public void readRegionStats(ReadRegionStatsRequest request, StreamObserver<RegionStats> response) {
        node.readRegionStats(request, response);
    }
}
