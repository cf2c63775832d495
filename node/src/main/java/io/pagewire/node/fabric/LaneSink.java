package io.pagewire.node.fabric;

import io.pagewire.node.loop.LoopDutyCycle;
import io.pagewire.node.nic.PacketBatch;
import io.pagewire.node.nic.PacketRouter;
import java.util.concurrent.atomic.LongAdder;

/**
 * Where a fabric's lanes hand what they bring: packet batches to the NIC, on the lane's own thread (no
 * hand-off per message) and, on a node's loops, acknowledged once the loop's read pass ends, so the
 * batches of one pass are acknowledged together; and link events (a lane can take data again, a link
 * came back, a peer restarted).
 */
final class LaneSink {
    private static final System.Logger LOG = System.getLogger(LaneSink.class.getName());

    /** Per thread: the batch just delivered stalled its lane (see {@link #takeStall}). */
    private static final ThreadLocal<boolean[]> STALLED = ThreadLocal.withInitial(() -> new boolean[1]);

    private volatile PacketRouter nic;
    private final LongAdder batchesFailed = new LongAdder();

    /** Whether the batch this thread delivered last stalled its lane on a receive fault, forgetting it. */
    static boolean takeStall() {
        boolean[] stalled = STALLED.get();
        boolean was = stalled[0];
        stalled[0] = false;
        return was;
    }

    /** Hands inbound packets and link events to this NIC's router from now on. */
    void attach(PacketRouter value) {
        nic = value;
    }

    /** A batch from {@code peer}: the NIC executes it on this thread. */
    void deliver(String peer, PacketBatch batch) {
        PacketRouter n = nic;
        if (n == null) {
            return;
        }
        try {
            LoopDutyCycle cycle = LoopDutyCycle.onThisLoop();
            if (cycle != null) {
                // The loop reads on: acknowledge what this pass brought once it ends.
                n.receive(peer, batch, task -> cycle.again(() -> afterPass(peer, task)));
                STALLED.get()[0] |= n.takeLaneStall();
            } else {
                n.receive(peer, batch);
            }
        } catch (RuntimeException e) {
            batchesFailed.increment();
            LOG.log(System.Logger.Level.WARNING, "a batch from " + peer + " failed in the NIC", e);
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

    /** A lane to {@code peer} can take data: queue pairs that stopped for it carry on. */
    void writable(String peer) {
        PacketRouter n = nic;
        if (n != null) {
            n.onPeerWritable(peer);
        }
    }

    /** What went out on a lane that broke may be lost: queue pairs to {@code peer} send again what is unacknowledged. */
    void resend(String peer) {
        PacketRouter n = nic;
        if (n != null) {
            n.onPeerReconnected(peer);
        }
    }

    /** {@code peer} restarted: the queue pairs connected to it fail. */
    void restarted(String peer) {
        PacketRouter n = nic;
        if (n != null) {
            n.onPeerRestarted(peer);
        }
    }

    /**
     * Inbound batches whose handling threw in the NIC. Each is a bug (bad input must be refused with a
     * NAK or dropped, not thrown): logged with its stack trace, counted, and the lane goes on.
     */
    long batchesFailed() {
        return batchesFailed.sum();
    }
}
