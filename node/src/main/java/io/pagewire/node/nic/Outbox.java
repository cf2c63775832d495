package io.pagewire.node.nic;

import java.util.Arrays;

/**
 * The packets a queue pair has built for its peer and not yet sent, with the DMA locks on the frames
 * their payloads come from. {@link #flush} hands them to the transport as one batch and then releases
 * the locks: the transport reads the packets and payloads before it returns (one that would read them
 * later copies them first). So both are reused from batch to batch: packets are slots of one
 * {@link PacketBatch}, filled in place ({@link #next}), and payloads are staged in one array (frames
 * live in shared memory off the heap, which a transport's buffers cannot take without a copy), from
 * which the transport copies them once into its buffers.
 */
final class Outbox {
    private final Wire wire;
    private final DmaEngine dma;
    private volatile int laneHint;
    private String peer;
    private final PacketBatch batch = new PacketBatch();
    private long[] locked = new long[8];
    private int lockedCount;
    /** Where this batch's payloads are staged; its bytes from 0 to {@link #staged} belong to packets not yet sent. */
    private byte[] staging = new byte[64 << 10];
    private int staged;
    /**
     * A packet's payload is being gathered element by element and is not yet {@link #add added}: a flush
     * meanwhile (a later element's page made the kernel pin or fault it in) leaves the staged bytes where
     * they are, so the next element is staged after the earlier ones, not over them.
     */
    private boolean gathering;

    Outbox(Wire wire, DmaEngine dma) {
        this.wire = wire;
        this.dma = dma;
    }

    int laneHint() {
        return laneHint;
    }

    void peer(String value, int hint) {
        peer = value;
        laneHint = hint;
    }

    /** A UD pair's next packet goes to {@code node}: what was built for another node goes out first. */
    void to(String node) {
        if (!node.equals(peer)) {
            if (!batch.isEmpty()) {
                flush();
            }
            peer = node;
        }
    }

    /** The next packet of the batch, cleared: the caller fills it in place before anything flushes the outbox. */
    Packet next() {
        return batch.add();
    }

    int size() {
        return batch.size();
    }

    void holdLock(long translation) {
        if (lockedCount == locked.length) {
            locked = Arrays.copyOf(locked, lockedCount * 2);
        }
        locked[lockedCount++] = translation;
    }

    /**
     * Room for a payload of {@code length} bytes in the staging array ({@link #staging()}, which this call
     * may replace): where it starts. The bytes copied there stay valid until {@link #flush}.
     */
    int reserve(int length) {
        if (staged + length > staging.length) {
            // The payloads staged before keep the old array; this batch and the next ones use the new one.
            staging = new byte[Math.max(staging.length * 2, length)];
            staged = 0;
        }
        int start = staged;
        staged += length;
        return start;
    }

    byte[] staging() {
        return staging;
    }

    /** A packet's payload is about to be gathered, element by element ({@link #endPayload} when it is whole). */
    void beginPayload() {
        gathering = true;
    }

    void endPayload() {
        gathering = false;
    }

    /** Sends what was built (if anything) and releases the DMA locks held for it. */
    void flush() {
        try {
            if (!batch.isEmpty()) {
                if (Wire.ALL_NODES.equals(peer)) {
                    wire.multicast(laneHint, batch);
                } else {
                    wire.transmit(peer, laneHint, batch);
                }
            }
        } finally {
            batch.clear(); // the transport has read the packets: their slots take the next batch
            for (int i = 0; i < lockedCount; i++) {
                dma.release(locked[i], false);
            }
            lockedCount = 0;
            if (!gathering) {
                staged = 0; // the transport has read the batch's payloads: the array starts over
            }
        }
    }
}
