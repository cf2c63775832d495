package io.pagewire.node.fabric;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.LoopDutyCycle;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.PacketTransport;
import io.pagewire.proto.fabric.FabricGrpc;
import io.pagewire.proto.fabric.LaneFrame;
import io.pagewire.proto.fabric.LaneHello;
import io.pagewire.node.security.PeerIdentity;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A node's fabric: the lanes (long-lived bidirectional gRPC streams) to every peer, and the only
 * part of Pagewire that knows node-to-node gRPC. It serves the {@code Fabric} service for lanes peers
 * dial, dials {@code lanesPerPeer} lanes to every peer it is told of, redials a broken lane with
 * back-off, and tells the NIC when a link comes back so that unacknowledged packets are replayed.
 *
 * <p>Inbound batches are handed to the NIC on the thread that received them (a direct executor:
 * no hand-off per message), one message requested at a time; on a node's own loops, what they call
 * for (acknowledgements, and the sends those allow) is done once the loop's read pass ends, so the
 * batches of one pass are acknowledged together. Outbound batches go on the lane a
 * queue pair's hint picks, respecting each stream's readiness; fault injection shapes them first.
 */
public final class Fabric implements PacketTransport, AutoCloseable {
    private static final System.Logger LOG = System.getLogger(Fabric.class.getName());
    /** How long a packet held back for reordering waits if no later batch carries it out. */
    private static final long REORDER_RELEASE_NS = 1_000_000;

    private final FabricContext context;
    private final ChannelFactory channels;
    private final long incarnation = System.nanoTime() ^ ThreadLocalRandom.current().nextLong();
    private final Map<String, PeerLink> peers = new ConcurrentHashMap<>();
    private final FaultInjector faults;
    private final java.util.concurrent.atomic.LongAdder lanesRefused = new java.util.concurrent.atomic.LongAdder();
    private final java.util.concurrent.atomic.LongAdder batchesFailed = new java.util.concurrent.atomic.LongAdder();
    private final ScheduledExecutorService scheduler;
    private volatile Nic nic;
    private volatile boolean closed;

    /** The whole cluster is shutting down: a peer's departure is expected, not news for the log. */
    private volatile boolean peersLeaving;
    private final List<java.util.function.Consumer<String>> peerListeners = new CopyOnWriteArrayList<>();

    public Fabric(FabricContext context, ChannelFactory channels) {
        this.context = context.conclude();
        this.channels = channels;
        this.faults = new FaultInjector(context);
        ScheduledThreadPoolExecutor executor = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "pagewire-fabric-" + context.nodeId());
            t.setDaemon(true);
            return t;
        });
        executor.setRemoveOnCancelPolicy(true);
        this.scheduler = executor;
    }

    /** Hands inbound packets and link events to this NIC from now on. */
    public void attach(Nic value) {
        nic = value;
    }

    public String nodeId() {
        return context.nodeId();
    }

    /** The service peers dial lanes on; the node adds it to its gRPC server. */
    public io.grpc.ServerServiceDefinition service() {
        Service service = new Service();
        return LaneMarshaller.service(service::lane);
    }

    public FaultInjector faults() {
        return faults;
    }

    /** Adds a peer and dials its lanes; {@code target} is its address ("host:port", or an in-process name). */
    public void connect(String peer, String target) {
        if (peer.equals(context.nodeId())) {
            return;
        }
        context.acceptPeer(peer);
        PeerLink link = link(peer);
        synchronized (link) {
            if (link.channel != null) {
                return;
            }
            link.target = target;
            link.channel = channels.open(peer, target);
        }
        for (int i = 0; i < context.lanesPerPeer(); i++) {
            dial(link, i);
        }
    }

    /** The channel lanes to a peer are dialled on, or null for a peer this node does not dial. */
    io.grpc.Channel channelTo(String peer) {
        PeerLink link = peers.get(peer);
        return link == null ? null : link.channel;
    }

    FabricContext context() {
        return context;
    }

    /** Whether this node has a link (up or not) to the peer. */
    public boolean knowsPeer(String peer) {
        return peers.containsKey(peer);
    }

    /** Calls {@code listener} with every peer known now and every peer added later (metrics bind per peer). */
    public void onPeerAdded(java.util.function.Consumer<String> listener) {
        peerListeners.add(listener);
        peers.keySet().forEach(listener);
    }

    /** Peers with at least one lane up. */
    public Set<String> connectedPeers() {
        Set<String> up = new java.util.TreeSet<>();
        peers.forEach((id, link) -> {
            if (link.anyUp()) {
                up.add(id);
            }
        });
        return up;
    }

    /** Lanes up to a peer, both directions. */
    public int lanesUp(String peer) {
        PeerLink link = peers.get(peer);
        return link == null ? 0 : link.upCount();
    }

    /** Traffic per peer link. */
    public Map<String, LinkStats> links() {
        Map<String, LinkStats> stats = new TreeMap<>();
        peers.forEach((id, link) -> stats.put(id, link.stats));
        return stats;
    }

    /**
     * Cuts the link to a peer: every lane to it is torn down and none is accepted or dialled until
     * {@link #heal}. Packets meanwhile are lost, as on a pulled cable.
     */
    public void cut(String peer) {
        faults.cut(peer);
        PeerLink link = peers.get(peer);
        if (link != null) {
            for (Lane lane : link.allLanes()) {
                laneDown(link, lane);
                lane.close(Status.UNAVAILABLE.withDescription("link to " + peer + " cut by fault injection").asRuntimeException());
            }
        }
    }

    /** Restores a cut link: lanes are dialled again at once. */
    public void heal(String peer) {
        faults.heal(peer);
        PeerLink link = peers.get(peer);
        if (link != null && link.channel != null) {
            for (int i = 0; i < context.lanesPerPeer(); i++) {
                if (link.outbound[i] == null && !link.dialling[i]) {
                    dial(link, i);
                }
            }
        }
    }

    private PeerLink link(String peer) {
        PeerLink existing = peers.get(peer);
        if (existing != null) {
            return existing;
        }
        PeerLink created = new PeerLink(peer);
        existing = peers.putIfAbsent(peer, created);
        if (existing != null) {
            return existing;
        }
        for (java.util.function.Consumer<String> listener : peerListeners) {
            listener.accept(peer);
        }
        return created;
    }

    // ---- PacketTransport ---------------------------------------------------------------------------

    @Override
    public void send(String peer, int laneHint, PacketBatch batch) {
        PeerLink link = peers.get(peer);
        Lane lane = link == null || faults.isCut(peer) ? null : link.pick(laneHint);
        if (lane == null) {
            if (link != null) {
                link.stats.unsentWhileDown.addAndGet(batch.getPacketsCount());
            }
            return;
        }
        PacketBatch out = batch;
        if (faults.shapes()) {
            out = faults.shape(peer, batch);
            if (faults.hasHeld(peer)) {
                scheduler.schedule(() -> sendHeld(peer, laneHint), REORDER_RELEASE_NS, TimeUnit.NANOSECONDS);
            }
        }
        if (faults.delays()) {
            // The frames the payloads wrap are locked only for this call: copy before waiting.
            PacketBatch later = FaultInjector.copy(out);
            faults.countDelayed();
            scheduler.schedule(() -> write(link, link.pick(laneHint), later), faults.nextDelayNs(), TimeUnit.NANOSECONDS);
            return;
        }
        write(link, lane, channels.copiesPayloads() ? FaultInjector.copy(out) : out);
    }

    @Override
    public boolean isWritable(String peer, int laneHint) {
        PeerLink link = peers.get(peer);
        if (link == null || faults.isCut(peer)) {
            return false;
        }
        Lane lane = link.pick(laneHint);
        return lane != null && lane.isReady();
    }

    private void sendHeld(String peer, int laneHint) {
        List<Packet> held = faults.releaseHeld(peer);
        PeerLink link = peers.get(peer);
        if (!held.isEmpty() && link != null && !faults.isCut(peer)) {
            write(link, link.pick(laneHint), PacketBatch.newBuilder().addAllPackets(held).build());
        }
    }

    private void write(PeerLink link, Lane lane, PacketBatch batch) {
        if (lane == null || batch.getPacketsCount() == 0) {
            return;
        }
        if (lane.send(LaneFrame.newBuilder().setBatch(batch).build())) {
            link.stats.batchesSent.incrementAndGet();
            link.stats.packetsSent.addAndGet(batch.getPacketsCount());
            for (Packet packet : batch.getPacketsList()) {
                link.stats.bytesSent.addAndGet(packet.getPayload().size());
            }
        } else {
            link.stats.unsentWhileDown.addAndGet(batch.getPacketsCount());
        }
    }

    // ---- lanes ---------------------------------------------------------------------------------------

    private void dial(PeerLink link, int index) {
        if (closed || faults.isCut(link.peer)) {
            return;
        }
        link.dialling[index] = true;
        AtomicReference<Lane> laneRef = new AtomicReference<>();
        ClientResponseObserver<LaneFrame, LaneFrame> responses = new ClientResponseObserver<>() {
            private ClientCallStreamObserver<LaneFrame> requests;

            @Override
            public void beforeStart(ClientCallStreamObserver<LaneFrame> requestStream) {
                requests = requestStream;
                requestStream.disableAutoRequestWithInitial(1);
                Lane lane = new Lane(link.peer, index, Lane.Direction.OUTBOUND, requestStream);
                laneRef.set(lane);
                // The handler can run before the stream is fully started (the onReady race): it only
                // wakes the NIC, which checks readiness itself.
                requestStream.setOnReadyHandler(() -> laneReady(lane));
            }

            @Override
            public void onNext(LaneFrame frame) {
                handle(frame, this::receive, () -> requests.request(1));
            }

            /** Handles one frame; false when it ended the lane. */
            private boolean receive(LaneFrame frame) {
                Lane lane = laneRef.get();
                if (frame == LaneMarshaller.MALFORMED) {
                    LOG.log(System.Logger.Level.WARNING, malformed(link.peer).getDescription());
                    lane.close(malformed(link.peer).asRuntimeException());
                    return false;
                }
                if (frame.hasHello()) {
                    if (!frame.getHello().getNodeId().equals(link.peer)) {
                        LOG.log(System.Logger.Level.WARNING, "node at " + link.target + " says it is " + frame.getHello().getNodeId()
                                + ", expected " + link.peer);
                        lane.close(Status.FAILED_PRECONDITION.withDescription("wrong peer").asRuntimeException());
                        return false;
                    }
                    link.outbound[index] = lane;
                    link.dialling[index] = false;
                    link.attempts[index] = 0;
                    noteIncarnation(link, frame.getHello().getIncarnation());
                    laneUp(link, lane);
                } else {
                    deliver(link, frame);
                }
                return true;
            }

            @Override
            public void onError(Throwable t) {
                ended(t);
            }

            @Override
            public void onCompleted() {
                ended(null);
            }

            private void ended(Throwable t) {
                Lane lane = laneRef.get();
                if (link.outbound[index] == lane) {
                    link.outbound[index] = null;
                }
                link.dialling[index] = false;
                laneDown(link, lane);
                lane.close(null);
                scheduleRedial(link, index);
            }
        };
        io.grpc.stub.ClientCalls.asyncBidiStreamingCall(link.channel.newCall(LaneMarshaller.LANE,
                io.grpc.CallOptions.DEFAULT.withOnReadyThreshold(context.onReadyThresholdBytes())), responses);
        laneRef.get().send(hello(index));
    }

    private void scheduleRedial(PeerLink link, int index) {
        if (closed || faults.isCut(link.peer) || link.dialling[index]) {
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

    private LaneFrame hello(int index) {
        return LaneFrame.newBuilder().setHello(LaneHello.newBuilder().setNodeId(context.nodeId()).setLaneIndex(index)
                .setIncarnation(incarnation)).build();
    }

    /**
     * A peer's hello names the incarnation of its process. A new one means the peer restarted: its
     * queue pairs are gone, so the ones connected to it here fail now instead of retrying into the void.
     */
    private void noteIncarnation(PeerLink link, long incarnation) {
        if (incarnation == 0) {
            return;
        }
        long before;
        synchronized (link) {
            before = link.incarnation;
            link.incarnation = incarnation;
        }
        if (before != 0 && before != incarnation) {
            LOG.log(System.Logger.Level.WARNING, "node " + context.nodeId() + ": " + link.peer + " restarted (a new incarnation);"
                    + " its queue pairs are gone, so the ones connected to them here fail");
            Nic n = nic;
            if (n != null) {
                n.onPeerRestarted(link.peer);
            }
        }
    }

    private void laneUp(PeerLink link, Lane lane) {
        lane.markUp();
        link.stats.lanesOpened.incrementAndGet();
        if (link.reportedUp.compareAndSet(false, true)) {
            long downSince = link.downSinceNs;
            LOG.log(System.Logger.Level.INFO, downSince == 0 ? "node " + context.nodeId() + ": linked to " + link.peer + describeTarget(link)
                    : String.format("node %s: linked to %s%s again after %.1f s", context.nodeId(), link.peer, describeTarget(link),
                            (System.nanoTime() - downSince) / 1e9));
        }
        Nic n = nic;
        if (n != null) {
            if (link.lostPackets) {
                // Packets went out on a lane that broke while no other was up: resend what is unacknowledged.
                link.lostPackets = false;
                n.onPeerReconnected(link.peer);
            }
            n.onPeerWritable(link.peer);
        }
    }

    private void laneDown(PeerLink link, Lane lane) {
        if (lane == null || !lane.isUp()) {
            link.inbound.remove(lane);
            return;
        }
        lane.markDown();
        link.inbound.remove(lane);
        link.stats.lanesLost.incrementAndGet();
        link.lostPackets = true;
        if (!link.anyUp() && link.reportedUp.compareAndSet(true, false) && !closed && !peersLeaving) {
            link.downSinceNs = System.nanoTime();
            LOG.log(System.Logger.Level.WARNING, "node " + context.nodeId() + ": lost the link to " + link.peer + describeTarget(link)
                    + "; its queue pairs retry until it is back or their retries run out");
        }
        Nic n = nic;
        if (n != null && link.anyUp()) {
            // What the broken lane carried is lost: resend it on the lanes still up. Duplicates are
            // recognised by PSN at the responder.
            link.lostPackets = false;
            n.onPeerReconnected(link.peer);
        }
    }

    /** The cluster is being shut down as a whole: links that end from now on are not reported as lost. */
    public void expectPeersToLeave() {
        peersLeaving = true;
    }

    private static String describeTarget(PeerLink link) {
        return link.target == null ? "" : " (" + link.target + ")";
    }

    private void laneReady(Lane lane) {
        Nic n = nic;
        if (n != null && lane.isReady()) {
            n.onPeerWritable(lane.peer);
        }
    }

    /**
     * Hands a lane's frame to its handler, asks for the next unless the handler ended the lane, and
     * gives the frame's receive buffer back (its payloads are not read after this).
     */
    private static void handle(LaneFrame frame, java.util.function.Predicate<LaneFrame> handler, Runnable requestNext) {
        try {
            if (handler.test(frame)) {
                requestNext.run();
            }
        } finally {
            LaneMarshaller.release(frame);
        }
    }

    private void deliver(PeerLink link, LaneFrame frame) {
        if (!frame.hasBatch() || faults.isCut(link.peer)) {
            return;
        }
        PacketBatch batch = frame.getBatch();
        link.stats.packetsReceived.addAndGet(batch.getPacketsCount());
        for (Packet packet : batch.getPacketsList()) {
            link.stats.bytesReceived.addAndGet(packet.getPayload().size());
        }
        Nic n = nic;
        if (n != null) {
            try {
                LoopDutyCycle cycle = LoopDutyCycle.onThisLoop();
                if (cycle != null) {
                    // The loop reads on: acknowledge what this pass brought once it ends.
                    n.receive(link.peer, batch, task -> cycle.again(() -> afterPass(link.peer, task)));
                } else {
                    n.receive(link.peer, batch);
                }
            } catch (RuntimeException e) {
                batchesFailed.increment();
                LOG.log(System.Logger.Level.WARNING, "a batch from " + link.peer + " failed in the NIC", e);
            }
        }
    }

    /** What a receive pass left to do (acknowledgements, the sends they allow); a failure there counts as a failed batch. */
    private void afterPass(String peer, Runnable task) {
        try {
            task.run();
        } catch (RuntimeException e) {
            batchesFailed.increment();
            LOG.log(System.Logger.Level.WARNING, "acknowledging batches from " + peer + " failed in the NIC", e);
        }
    }

    /** Ends every lane, stops redialling and closes the channels. */
    @Override
    public void close() {
        closed = true;
        scheduler.shutdownNow();
        for (PeerLink link : peers.values()) {
            for (Lane lane : link.allLanes()) {
                lane.close(null);
            }
            ManagedChannel channel = link.channel;
            if (channel != null) {
                channel.shutdownNow();
                try {
                    channel.awaitTermination(5, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    /** The lanes to one peer: those this node dialled, by index, and those the peer dialled. */
    private final class PeerLink {
        final String peer;
        final LinkStats stats = new LinkStats();
        final Lane[] outbound = new Lane[context.lanesPerPeer()];
        final boolean[] dialling = new boolean[context.lanesPerPeer()];
        final int[] attempts = new int[context.lanesPerPeer()];
        final List<Lane> inbound = new CopyOnWriteArrayList<>();
        volatile String target;
        volatile ManagedChannel channel;
        /** A lane broke and nothing was resent yet. */
        volatile boolean lostPackets;
        /** Whether the log last said the link is up (so it says each change once). */
        final java.util.concurrent.atomic.AtomicBoolean reportedUp = new java.util.concurrent.atomic.AtomicBoolean();
        /** When the last lane went down, for the log line of the reconnection; 0 before the first loss. */
        volatile long downSinceNs;
        /** The incarnation the peer's hellos named last; 0 before the first. Guarded by the link. */
        long incarnation;

        /** Whether this node sends on the lanes it dialled (see {@link #pick}). */
        final boolean prefersDialled;

        PeerLink(String peer) {
            this.peer = peer;
            this.prefersDialled = context.nodeId().compareTo(peer) < 0;
        }

        /**
         * The lane for a hint. Both nodes of a pair pick from the same connections, so that a queue
         * pair's packets and the acknowledgements coming back share one TCP connection (where
         * acknowledgements ride with data and one wake serves both): the node whose id sorts first
         * prefers the lanes it dialled, the other the lanes it accepted; either falls back to the
         * other kind when none of its preferred lanes is up.
         */
        Lane pick(int hint) {
            if (prefersDialled) {
                Lane lane = pickDialled(hint);
                return lane != null ? lane : pickAccepted(hint);
            }
            Lane lane = pickAccepted(hint);
            return lane != null ? lane : pickDialled(hint);
        }

        private Lane pickDialled(int hint) {
            int n = outbound.length;
            int start = Math.floorMod(hint, n);
            for (int i = 0; i < n; i++) {
                Lane lane = outbound[(start + i) % n];
                if (lane != null && lane.isUp()) {
                    return lane;
                }
            }
            return null;
        }

        private Lane pickAccepted(int hint) {
            // The lane the peer dialled under the index the hint names is the one it sends on.
            int index = Math.floorMod(hint, outbound.length);
            for (Lane lane : inbound) {
                if (lane.index == index && lane.isUp()) {
                    return lane;
                }
            }
            int m = inbound.size();
            for (int i = 0; i < m; i++) {
                try {
                    Lane lane = inbound.get(Math.floorMod(hint + i, m));
                    if (lane.isUp()) {
                        return lane;
                    }
                } catch (IndexOutOfBoundsException raced) {
                    return null;
                }
            }
            return null;
        }

        boolean anyUp() {
            return upCount() > 0;
        }

        int upCount() {
            int count = 0;
            for (Lane lane : allLanes()) {
                if (lane.isUp()) {
                    count++;
                }
            }
            return count;
        }

        List<Lane> allLanes() {
            List<Lane> all = new java.util.ArrayList<>(inbound);
            for (Lane lane : outbound) {
                if (lane != null) {
                    all.add(lane);
                }
            }
            return all;
        }
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
                return Status.UNAUTHENTICATED.withDescription(me + " refused a lane claiming to be " + shown(peer)
                        + ": the caller presented no Pagewire certificate");
            }
            if (caller.kind() != PeerIdentity.Kind.NODE) {
                return Status.PERMISSION_DENIED.withDescription(me + " refused a lane claiming to be " + shown(peer)
                        + ": the caller's certificate is " + shown(caller.toString()) + "'s, not a node's");
            }
            if (!caller.name().equals(peer)) {
                return Status.PERMISSION_DENIED.withDescription(me + " refused a lane claiming to be " + shown(peer)
                        + ": the caller's certificate names " + shown(caller.toString()));
            }
        }
        if (!context.acceptedPeers().contains(peer)) {
            return Status.PERMISSION_DENIED.withDescription(me + " refused a lane from " + shown(peer)
                    + ": not one of its peers (pagewire.node.peers, pagewire.node.acceptPeers)");
        }
        return null;
    }

    /** The status a lane ends with when its peer sent bytes that are not a LaneFrame. */
    private Status malformed(String from) {
        return Status.INVALID_ARGUMENT.withDescription("node " + context.nodeId() + " ended a lane from " + shown(from)
                + ": a message that is not a lane frame (" + LaneMarshaller.malformedReason() + ")");
    }

    /** An id a caller sent, cut short enough to quote in a log line or a status. */
    private static String shown(String id) {
        return id.length() <= 64 ? id : id.substring(0, 64) + "... (" + id.length() + " characters)";
    }

    /**
     * Inbound batches whose handling threw in the NIC. Each is a bug (bad input must be refused with a
     * NAK or dropped, not thrown): logged with its stack trace, counted, and the lane goes on.
     */
    public long batchesFailed() {
        return batchesFailed.sum();
    }

    /** Lanes refused because of who they came from. */
    public long lanesRefused() {
        return lanesRefused.sum();
    }

    /** The server end: lanes peers dial. */
    private final class Service extends FabricGrpc.FabricImplBase {
        @Override
        public StreamObserver<LaneFrame> lane(StreamObserver<LaneFrame> responseObserver) {
            // Who the caller's certificate says it is; read now, while the call's context is current.
            PeerIdentity caller = PeerIdentity.CURRENT.get();
            ServerCallStreamObserver<LaneFrame> out = (ServerCallStreamObserver<LaneFrame>) responseObserver;
            out.disableAutoRequest();
            out.setOnReadyThreshold(context.onReadyThresholdBytes());
            AtomicReference<Lane> laneRef = new AtomicReference<>();
            AtomicReference<PeerLink> linkRef = new AtomicReference<>();
            out.setOnReadyHandler(() -> {
                Lane lane = laneRef.get();
                if (lane != null) {
                    laneReady(lane);
                }
            });
            out.request(1);
            return new StreamObserver<>() {
                @Override
                public void onNext(LaneFrame frame) {
                    handle(frame, this::receive, () -> out.request(1));
                }

                /** Handles one frame; false when it ended the lane. */
                private boolean receive(LaneFrame frame) {
                    Lane lane = laneRef.get();
                    if (frame == LaneMarshaller.MALFORMED) {
                        Status status = malformed(lane == null ? "a caller before its hello" : lane.peer);
                        LOG.log(System.Logger.Level.WARNING, status.getDescription());
                        out.onError(status.asRuntimeException());
                        ended();
                        return false;
                    }
                    if (lane == null) {
                        if (!frame.hasHello()) {
                            out.onError(Status.INVALID_ARGUMENT.withDescription("a lane must start with a LaneHello").asRuntimeException());
                            return false;
                        }
                        String peer = frame.getHello().getNodeId();
                        if (closed || faults.isCut(peer) || peer.equals(context.nodeId())) {
                            out.onError(Status.UNAVAILABLE.withDescription("node " + context.nodeId() + " does not accept a lane from "
                                    + shown(peer) + (faults.isCut(peer) ? ": link cut" : "")).asRuntimeException());
                            return false;
                        }
                        Status refused = admission(peer, caller);
                        if (refused != null) {
                            lanesRefused.increment();
                            LOG.log(System.Logger.Level.WARNING, refused.getDescription());
                            out.onError(refused.asRuntimeException());
                            return false;
                        }
                        PeerLink link = link(peer);
                        lane = new Lane(peer, frame.getHello().getLaneIndex(), Lane.Direction.INBOUND, out);
                        laneRef.set(lane);
                        linkRef.set(link);
                        lane.send(hello(frame.getHello().getLaneIndex()));
                        link.inbound.add(lane);
                        noteIncarnation(link, frame.getHello().getIncarnation());
                        laneUp(link, lane);
                    } else {
                        deliver(linkRef.get(), frame);
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
                    Lane lane = laneRef.getAndSet(null);
                    if (lane != null) {
                        laneDown(linkRef.get(), lane);
                        lane.close(null);
                    }
                }
            };
        }
    }
}
