package io.pagewire.node.fabric;

import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.PacketTransport;
import io.pagewire.node.security.BadInput;
import io.pagewire.node.nic.Packet;
import io.pagewire.node.nic.PacketBatch;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * A node's fabric: the links (long-lived bidirectional gRPC streams, "lanes") to every peer, and the
 * only part of Pagewire that knows node-to-node gRPC. Its {@link Dialer} opens the lanes this node
 * dials and redials them, its {@link LaneAcceptor} admits the lanes peers dial, each {@link PeerLink}
 * keeps one peer's lanes and picks the one a queue pair's packets take, and the {@link LaneSink}
 * hands what arrives to the NIC. Outbound batches go on the lane a queue pair's hint picks, respecting
 * each stream's readiness; fault injection shapes them first.
 */
public final class Fabric implements PacketTransport, AutoCloseable {
    /** How long a packet held back for reordering waits if no later batch carries it out. */
    private static final long REORDER_RELEASE_NS = 1_000_000;

    private final FabricContext context;
    private final ChannelFactory channels;
    private final Map<String, PeerLink> peers = new ConcurrentHashMap<>();
    private final FaultInjector faults;
    private final ScheduledExecutorService scheduler;
    private final LaneSink sink = new LaneSink();
    private final Dialer dialer;
    private final LaneAcceptor acceptor;
    private final List<Consumer<String>> peerListeners = new CopyOnWriteArrayList<>();
    private volatile boolean closed;
    /** The whole cluster is shutting down: a peer's departure is expected, not news for the log. */
    private volatile boolean peersLeaving;

    /** @param badInput where lane frames that do not parse are reported */
    public Fabric(FabricContext context, ChannelFactory channels, BadInput badInput) {
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
        long incarnation = System.nanoTime() ^ ThreadLocalRandom.current().nextLong();
        this.dialer = new Dialer(context, incarnation, scheduler, () -> closed, faults::isCut, badInput);
        this.acceptor = new LaneAcceptor(context, incarnation, () -> closed, faults::isCut, this::link, badInput);
    }

    /** Hands inbound packets and link events to this NIC from now on. */
    public void attach(Nic nic) {
        sink.attach(nic.router());
    }

    public String nodeId() {
        return context.nodeId();
    }

    /** The service peers dial lanes on; the node adds it to its gRPC server. */
    public io.grpc.ServerServiceDefinition service() {
        return acceptor.service();
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
            dialer.dial(link, i);
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
    public void onPeerAdded(Consumer<String> listener) {
        peerListeners.add(listener);
        peers.keySet().forEach(listener);
    }

    /** Peers with at least one lane up. */
    public Set<String> connectedPeers() {
        Set<String> up = new TreeSet<>();
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
                link.laneDown(lane);
                lane.close(Status.UNAVAILABLE.withDescription("link to " + peer + " cut by fault injection").asRuntimeException());
            }
        }
    }

    /** Restores a cut link: lanes are dialled again at once. */
    public void heal(String peer) {
        faults.heal(peer);
        PeerLink link = peers.get(peer);
        if (link != null) {
            dialer.dialMissing(link);
        }
    }

    private PeerLink link(String peer) {
        PeerLink existing = peers.get(peer);
        if (existing != null) {
            return existing;
        }
        PeerLink created = new PeerLink(context.nodeId(), peer, context.lanesPerPeer(), sink, () -> !closed && !peersLeaving);
        existing = peers.putIfAbsent(peer, created);
        if (existing != null) {
            return existing;
        }
        for (Consumer<String> listener : peerListeners) {
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
                link.stats.unsentWhileDown.addAndGet(batch.size());
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
            // The packets and the frames their payloads wrap are the sender's only for this call: copy before waiting.
            PacketBatch later = out.copy();
            faults.countDelayed();
            scheduler.schedule(() -> link.write(link.pick(laneHint), later), faults.nextDelayNs(), TimeUnit.NANOSECONDS);
            return;
        }
        link.write(lane, channels.copiesPayloads() ? out.copy() : out);
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

    @Override
    public Set<String> peers() {
        return peers.keySet();
    }

    @Override
    public boolean reaches(String peer) {
        PeerLink link = peers.get(peer);
        return link != null && !faults.isCut(peer) && link.pick(0) != null;
    }

    private void sendHeld(String peer, int laneHint) {
        List<Packet> held = faults.releaseHeld(peer);
        PeerLink link = peers.get(peer);
        if (!held.isEmpty() && link != null && !faults.isCut(peer)) {
            PacketBatch batch = new PacketBatch();
            for (Packet packet : held) {
                batch.addView(packet);
            }
            link.write(link.pick(laneHint), batch);
        }
    }

    /** The cluster is being shut down as a whole: links that end from now on are not reported as lost. */
    public void expectPeersToLeave() {
        peersLeaving = true;
    }

    /** Received batches whose handling threw in the NIC: each a bug, logged with its stack trace. */
    public long batchesFailed() {
        return sink.batchesFailed();
    }

    /** Lanes refused because of who they came from. */
    public long lanesRefused() {
        return acceptor.refused();
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
}
