package io.pagewire.node.fabric;

import io.grpc.ManagedChannel;
import io.pagewire.node.nic.PacketBatch;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.function.BooleanSupplier;

/**
 * The link to one peer: the lanes this node dialled to it (by index) and those it dialled here, which
 * lane a queue pair's packets take, whether the link is up (said once per change in the log), and the
 * peer's incarnation, a new one of which means it restarted.
 */
final class PeerLink {
    private static final System.Logger LOG = System.getLogger(PeerLink.class.getName());

    final String nodeId;
    final String peer;
    final LinkStats stats = new LinkStats();
    final Lane[] outbound;
    final boolean[] dialling;
    final int[] attempts;
    final List<Lane> inbound = new CopyOnWriteArrayList<>();
    volatile String target;
    volatile ManagedChannel channel;
    private final LaneSink sink;
    /** Whether losses are news: false while this node or the whole cluster is shutting down. */
    private final BooleanSupplier reportLosses;
    /** A lane broke and nothing was resent yet. */
    private volatile boolean lostPackets;
    /** Whether the log last said the link is up (so it says each change once). */
    private final AtomicBoolean reportedUp = new AtomicBoolean();
    /** When the last lane went down, for the log line of the reconnection; 0 before the first loss. */
    private volatile long downSinceNs;
    /** The incarnation the peer's hellos named last; 0 before the first. Guarded by this. */
    private long incarnation;
    /** Whether this node sends on the lanes it dialled (see {@link #pick}). */
    private final boolean prefersDialled;
    /** The lane each hint (modulo the lane count) last took: it keeps it while that lane is up. */
    private final AtomicReferenceArray<Lane> taken;

    PeerLink(String nodeId, String peer, int lanes, LaneSink sink, BooleanSupplier reportLosses) {
        this.nodeId = nodeId;
        this.peer = peer;
        this.outbound = new Lane[lanes];
        this.dialling = new boolean[lanes];
        this.attempts = new int[lanes];
        this.sink = sink;
        this.reportLosses = reportLosses;
        this.prefersDialled = nodeId.compareTo(peer) < 0;
        this.taken = new AtomicReferenceArray<>(lanes);
    }

    /**
     * The lane for a hint. Both nodes of a pair pick from the same connections, so that a queue pair's
     * packets and the acknowledgements coming back share one TCP connection (where acknowledgements
     * ride with data and one wake serves both): the node whose id sorts first prefers the lanes it
     * dialled, the other the lanes it accepted; either falls back to the other kind when none of its
     * preferred lanes is up. A hint keeps the lane it took while that lane is up, even once a lane it
     * prefers comes up: a queue pair's packets stay on one stream, in order, as on one path of a network.
     * (Moved while the old lane's receiving thread was stalled, on a PIN_ON_MISS pin say, later packets
     * overtook earlier ones and the responder NAKed the whole window as out of sequence.)
     */
    Lane pick(int hint) {
        int slot = Math.floorMod(hint, taken.length());
        Lane last = taken.get(slot);
        if (last != null && last.isUp()) {
            return last;
        }
        Lane lane = choose(hint);
        if (lane != null) {
            taken.set(slot, lane);
        }
        return lane;
    }

    private Lane choose(int hint) {
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
        List<Lane> all = new ArrayList<>(inbound);
        for (Lane lane : outbound) {
            if (lane != null) {
                all.add(lane);
            }
        }
        return all;
    }

    /** Writes a batch on a lane; counted as sent, or as unsent when no lane could take it. */
    void write(Lane lane, PacketBatch batch) {
        if (batch.isEmpty()) {
            return;
        }
        if (lane != null && lane.send(LaneMessage.batch(batch))) {
            stats.batchesSent.incrementAndGet();
            stats.packetsSent.addAndGet(batch.size());
            stats.bytesSent.addAndGet(batch.payloadBytes());
        } else {
            stats.unsentWhileDown.addAndGet(batch.size());
        }
    }

    /** A batch arrived on one of the link's lanes. */
    void received(PacketBatch batch) {
        stats.packetsReceived.addAndGet(batch.size());
        stats.bytesReceived.addAndGet(batch.payloadBytes());
        sink.deliver(peer, batch);
    }

    /** A lane finished its handshake. */
    void laneUp(Lane lane) {
        lane.markUp();
        stats.lanesOpened.incrementAndGet();
        if (reportedUp.compareAndSet(false, true)) {
            long downSince = downSinceNs;
            LOG.log(System.Logger.Level.INFO, downSince == 0 ? "node " + nodeId + ": linked to " + peer + describeTarget()
                    : String.format("node %s: linked to %s%s again after %.1f s", nodeId, peer, describeTarget(),
                            (System.nanoTime() - downSince) / 1e9));
        }
        if (lostPackets) {
            // Packets went out on a lane that broke while no other was up: resend what is unacknowledged.
            lostPackets = false;
            sink.resend(peer);
        }
        sink.writable(peer);
    }

    /** A lane ended, either way. */
    void laneDown(Lane lane) {
        if (lane == null || !lane.isUp()) {
            inbound.remove(lane);
            return;
        }
        lane.markDown();
        inbound.remove(lane);
        stats.lanesLost.incrementAndGet();
        lostPackets = true;
        if (!anyUp() && reportedUp.compareAndSet(true, false) && reportLosses.getAsBoolean()) {
            downSinceNs = System.nanoTime();
            LOG.log(System.Logger.Level.WARNING, "node " + nodeId + ": lost the link to " + peer + describeTarget()
                    + "; its queue pairs retry until it is back or their retries run out");
        }
        if (anyUp()) {
            // What the broken lane carried is lost: resend it on the lanes still up. Duplicates are
            // recognised by PSN at the responder.
            lostPackets = false;
            sink.resend(peer);
        }
    }

    /** A lane can take data again. */
    void laneReady(Lane lane) {
        if (lane.isReady()) {
            sink.writable(peer);
        }
    }

    /**
     * A peer's hello names the incarnation of its process. A new one means the peer restarted: its
     * queue pairs are gone, so the ones connected to it here fail now instead of retrying into the void.
     */
    void noteIncarnation(long value) {
        if (value == 0) {
            return;
        }
        long before;
        synchronized (this) {
            before = incarnation;
            incarnation = value;
        }
        if (before != 0 && before != value) {
            LOG.log(System.Logger.Level.WARNING, "node " + nodeId + ": " + peer + " restarted (a new incarnation);"
                    + " its queue pairs are gone, so the ones connected to them here fail");
            sink.restarted(peer);
        }
    }

    private String describeTarget() {
        return target == null ? "" : " (" + target + ")";
    }
}
