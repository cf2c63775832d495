package io.pagewire.node.nic;

import io.pagewire.proto.fabric.Opcode;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.LongAdder;

/**
 * The NIC's port to the wire: it hands every received packet to its queue pair (a bad one is counted
 * and dropped, never stopping its batch), acknowledges what a read pass brought once the pass ends,
 * sends what queue pairs build through the {@link PacketTransport} (or back in, for a pair between two
 * endpoints of this node), holds queue pairs that wait for a lane to take data, and tells them of
 * their peer's link coming back or their peer restarting.
 */
public final class PacketRouter implements Wire, AutoCloseable {
    private static final System.Logger LOG = System.getLogger(PacketRouter.class.getName());

    private final NicServices nic;
    private final QueuePairTable queuePairs;
    private final NicCounters counters;
    private final Map<String, Set<LinkWaiter>> waitingForLink = new ConcurrentHashMap<>();
    private final ThreadLocal<ReceivePass> receivePass = ThreadLocal.withInitial(ReceivePass::new);
    private volatile PacketTransport transport;
    private volatile ManagementAgent managementAgent;
    /** Carries batches between queue pairs of this node; made at the first such batch. */
    private ExecutorService loopback;

    PacketRouter(NicServices nic, QueuePairTable queuePairs, PacketTransport transport) {
        this.nic = nic;
        this.queuePairs = queuePairs;
        this.counters = nic.counters();
        this.transport = transport;
    }

    /** Sets the transport packets leave through, when it could only be built after the NIC. */
    public void attach(PacketTransport value) {
        transport = value;
    }

    /** A batch of packets from a peer. A bad packet is counted and dropped or refused; it never stops the batch. */
    public void receive(String peer, PacketBatch batch) {
        List<QueuePair> touched = new ArrayList<>(2);
        execute(peer, batch, touched, receivePass.get());
        for (QueuePair qp : touched) {
            qp.afterBatch();
        }
    }

    /**
     * As {@link #receive(String, PacketBatch)}, for a transport that reads many batches in one pass:
     * what the batches call for afterwards (acknowledgements, and the sends they allow) waits until
     * the pass ends, so that the batches of one pass are acknowledged together, as a NIC coalesces
     * acknowledgements (and an operating system its interrupts). The first batch of a pass on a
     * thread hands {@code passes} the task that does it.
     */
    public void receive(String peer, PacketBatch batch, ReceivePasses passes) {
        ReceivePass pass = receivePass.get();
        execute(peer, batch, pass.touched, pass);
        if (!pass.touched.isEmpty() && !pass.scheduled) {
            pass.scheduled = true;
            passes.atPassEnd(pass);
        }
    }

    /** How a transport that reads in passes runs a task once its current pass ends (on the same thread). */
    public interface ReceivePasses {
        void atPassEnd(Runnable task);
    }

    /**
     * The queue pairs that batches received on one thread touched in its current pass, and the peer
     * whose batch the thread is executing (what a lane's stall is charged to).
     */
    private static final class ReceivePass implements Runnable {
        final List<QueuePair> touched = new ArrayList<>(4);
        boolean scheduled;
        String executingFor;
        /** A receive stalled the lane since {@link #takeLaneStall} last looked. */
        boolean stalled;

        @Override
        public void run() {
            scheduled = false;
            try {
                for (int i = 0; i < touched.size(); i++) {
                    touched.get(i).afterBatch();
                }
            } finally {
                touched.clear();
            }
        }
    }

    /** Hands every packet of a batch to its queue pair, noting each queue pair touched. */
    private void execute(String peer, PacketBatch batch, List<QueuePair> touched, ReceivePass thread) {
        String outer = thread.executingFor;
        thread.executingFor = peer;
        try {
            executePackets(peer, batch, touched);
        } finally {
            thread.executingFor = outer;
        }
    }

    private void executePackets(String peer, PacketBatch batch, List<QueuePair> touched) {
        for (int i = 0; i < batch.size(); i++) {
            Packet packet = batch.get(i);
            counters.increment(NicCounter.PACKETS_RECEIVED);
            counters.add(NicCounter.BYTES_RECEIVED, packet.payloadLength());
            if (packet.getOpcode() == Opcode.CONNECTION_MANAGEMENT) {
                management(peer, packet);
                continue;
            }
            if (packet.getDstQpn() == MULTICAST_QPN) {
                for (QueuePair member : queuePairs.multicastMembers(packet.getMulticastLid())) {
                    receiveDatagram(member, peer, packet, touched);
                }
                continue;
            }
            QueuePair qp = queuePairs.get(packet.getDstQpn());
            if (qp != null && qp.datagram()) {
                receiveDatagram(qp, peer, packet, touched);
                continue;
            }
            QpAddress connected = qp == null ? null : qp.peer();
            if (connected == null || !connected.node().equals(peer) || connected.qpn() != packet.getSrcQpn()) {
                counters.increment(NicCounter.DROPPED_PACKETS);
                continue;
            }
            nic.contexts().read(ContextCache.Kind.QUEUE_PAIR, qp.qpn());
            try {
                qp.receive(packet);
            } catch (RuntimeException e) {
                counters.increment(NicCounter.DROPPED_PACKETS);
                LOG.log(System.Logger.Level.WARNING, "packet " + packet.getOpcode() + " psn " + packet.getPsn() + " for " + qp
                        + " from " + peer + " failed", e);
            }
            if (!touched.contains(qp)) {
                touched.add(qp);
            }
        }
    }

    /** A UD pair takes a datagram from any sender. */
    private void receiveDatagram(QueuePair qp, String peer, Packet packet, List<QueuePair> touched) {
        nic.contexts().read(ContextCache.Kind.QUEUE_PAIR, qp.qpn());
        try {
            qp.receiveDatagram(peer, packet);
        } catch (RuntimeException e) {
            counters.increment(NicCounter.DROPPED_PACKETS);
            LOG.log(System.Logger.Level.WARNING, "datagram for " + qp + " from " + peer + " failed", e);
        }
        if (!touched.contains(qp)) {
            touched.add(qp);
        }
    }

    /** Hands a connection-management packet to the node's connection manager; its payload is copied, as the batch's array is reused. */
    private void management(String peer, Packet packet) {
        ManagementAgent agent = managementAgent;
        if (agent == null) {
            counters.increment(NicCounter.DROPPED_PACKETS);
            return;
        }
        try {
            agent.received(peer, packet.payloadBytes());
        } catch (RuntimeException e) {
            counters.increment(NicCounter.DROPPED_PACKETS);
            LOG.log(System.Logger.Level.WARNING, "connection-management packet from " + peer + " failed: " + e);
        }
    }

    /** Where the node's connection manager (InfiniBand's general services agent, QP 1) gets its packets. */
    public interface ManagementAgent {
        /** A CONNECTION_MANAGEMENT packet's payload from {@code peer}, on a receiving thread: return quickly. */
        void received(String peer, byte[] payload);

        /** {@code peer}'s process restarted: what it knew of its connections is gone. */
        void peerRestarted(String peer);
    }

    /** Sets the agent connection-management packets go to; before one is set they are dropped. */
    public void attachManagement(ManagementAgent agent) {
        managementAgent = agent;
    }

    /** Sends a connection-management message to a node (this one included), on queue pair 1 as the CM's MADs travel. */
    public void sendManagement(String peer, byte[] payload) {
        PacketBatch batch = new PacketBatch();
        batch.add().setOpcode(Opcode.CONNECTION_MANAGEMENT).setDstQpn(MANAGEMENT_QPN).setSrcQpn(MANAGEMENT_QPN).setPayload(payload);
        transmit(peer, 0, batch);
    }

    /** The destination QPN of a multicast datagram (InfiniBand's 0xFFFFFF): every pair attached to its group takes it. */
    public static final int MULTICAST_QPN = 0xFF_FFFF;


    /** InfiniBand's general services queue pair, which CM messages travel on; no queue pair of this NIC has its number's role. */
    public static final int MANAGEMENT_QPN = 1;

    /** The link to a peer can take data again: queue pairs that stopped for it carry on. */
    public void onPeerWritable(String peer) {
        Set<LinkWaiter> waiting = waitingForLink.get(peer);
        if (waiting == null) {
            return;
        }
        for (LinkWaiter waiter : List.copyOf(waiting)) {
            waiting.remove(waiter);
            waiter.kick();
        }
    }

    /** A link to a peer was (re)established: queue pairs to it send again what is unacknowledged. */
    public void onPeerReconnected(String peer) {
        for (QueuePair qp : queuePairs.all()) {
            QpAddress p = qp.peer();
            if (p != null && p.node().equals(peer)) {
                qp.replay();
            }
        }
    }

    /** A peer restarted: the queue pairs connected to it fail, since the ones they were connected to are gone; so do its connections. */
    public void onPeerRestarted(String peer) {
        ManagementAgent agent = managementAgent;
        if (agent != null) {
            agent.peerRestarted(peer);
        }
        for (QueuePair qp : queuePairs.all()) {
            QpAddress p = qp.peer();
            if (p != null && p.node().equals(peer)) {
                qp.peerRestarted();
            }
        }
    }

    @Override
    public void multicast(int laneHint, PacketBatch batch) {
        PacketTransport t = transport;
        if (t != null) {
            for (String peer : t.peers()) {
                if (t.reaches(peer)) {
                    transmit(peer, laneHint, batch);
                }
            }
        }
        transmit(nic.nodeId(), laneHint, batch);
    }

    @Override
    public void transmit(String peer, int laneHint, PacketBatch batch) {
        counters.add(NicCounter.BYTES_SENT, batch.payloadBytes());
        counters.add(NicCounter.PACKETS_SENT, batch.size());
        if (peer.equals(nic.nodeId())) {
            loopback(batch);
            return;
        }
        PacketTransport t = transport;
        if (t != null) {
            t.send(peer, laneHint, batch);
        }
    }

    /**
     * A queue pair between two endpoints of this node: the batch comes back in on the NIC's loopback
     * thread, as it would from a link (never on the sender's thread, which holds its queue pair's
     * lock). The batch is copied first, as a transport copies it into its buffers: its slots are the
     * sender's again, and its payloads views of frames locked only, once this returns.
     */
    private void loopback(PacketBatch batch) {
        PacketBatch delivered = batch.copy();
        try {
            loopbackThread().execute(() -> receive(nic.nodeId(), delivered));
        } catch (RejectedExecutionException e) {
            // Closing: nothing is delivered any more.
        }
    }

    private synchronized ExecutorService loopbackThread() {
        if (loopback == null) {
            loopback = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "pagewire-nic-loopback-" + nic.nodeId());
                t.setDaemon(true);
                return t;
            });
        }
        return loopback;
    }

    @Override
    public boolean isWritable(String peer, int laneHint) {
        if (peer.equals(nic.nodeId())) {
            return true;
        }
        PacketTransport t = transport;
        return t != null && t.isWritable(peer, laneHint);
    }

    @Override
    public boolean reaches(String peer) {
        if (peer.equals(nic.nodeId())) {
            return true;
        }
        PacketTransport t = transport;
        return t != null && t.reaches(peer);
    }

    @Override
    public void waitForWritable(String peer, LinkWaiter waiter) {
        if (waitingForLink.computeIfAbsent(peer, p -> ConcurrentHashMap.newKeySet()).add(waiter)) {
            counters.increment(NicCounter.LINK_WAITS);
        }
        // The link may have turned writable between the check and the registration.
        if (isWritable(peer, waiter.laneHint())) {
            nic.timers().schedule(1_000, () -> onPeerWritable(peer));
        }
    }

    /** Nanoseconds the packets from each peer waited while PIN_ON_MISS pinned their pages, by peer. */
    private final Map<String, LongAdder> receiveStallByPeer = new ConcurrentHashMap<>();

    /**
     * A receive stalled the lane it came on (U-Net/MM): charged to the peer whose batch this thread
     * is executing. A stall outside a batch's execution (none is known) counts in the NIC's total only.
     */
    @Override
    public void laneStalled(long nanos) {
        ReceivePass pass = receivePass.get();
        pass.stalled = true;
        String peer = pass.executingFor;
        if (peer != null) {
            receiveStallByPeer.computeIfAbsent(peer, p -> new LongAdder()).add(nanos);
        }
    }

    /**
     * Whether a receive on this thread stalled its lane (PIN_ON_MISS) since the last call, forgetting it:
     * the transport then lets the acknowledgements of what was executed out before it reads on.
     */
    public boolean takeLaneStall() {
        ReceivePass pass = receivePass.get();
        boolean stalled = pass.stalled;
        pass.stalled = false;
        return stalled;
    }

    /** Nanoseconds packets from {@code peer} waited while PIN_ON_MISS pinned their destination pages. */
    public long receiveStallNanos(String peer) {
        LongAdder stalled = receiveStallByPeer.get(peer);
        return stalled == null ? 0 : stalled.sum();
    }

    /** A queue pair closed: it waits for no lane any more. */
    void forget(LinkWaiter waiter) {
        for (Set<LinkWaiter> waiting : waitingForLink.values()) {
            waiting.remove(waiter);
        }
    }

    @Override
    public synchronized void close() {
        if (loopback != null) {
            loopback.shutdownNow();
        }
    }
}
