package io.pagewire.node.nic;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import java.util.Arrays;

/**
 * The packets a queue pair has built for its peer and not yet sent, with the DMA locks on the frames
 * their payloads come from. {@link #flush} hands them to the transport as one batch and then releases
 * the locks: the transport reads the payloads before it returns (one that would read them later
 * copies them first). So payloads are staged in one array reused from batch to batch: frames live in
 * shared memory off the heap, which protobuf cannot wrap without a copy of its own (and an allocation
 * per packet), and the transport copies the staged bytes once more into its buffers.
 */
final class Outbox {
    private final Nic nic;
    private final DmaEngine dma;
    private volatile int laneHint;
    private String peer;
    private PacketBatch.Builder batch = PacketBatch.newBuilder();
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

    Outbox(Nic nic) {
        this.nic = nic;
        this.dma = nic.dma();
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
            if (batch.getPacketsCount() > 0) {
                flush();
            }
            peer = node;
        }
    }

    void add(Packet packet) {
        batch.addPackets(packet);
    }

    void add(Packet.Builder packet) {
        batch.addPackets(packet);
    }

    int size() {
        return batch.getPacketsCount();
    }

    void holdLock(long translation) {
        if (lockedCount == locked.length) {
            locked = Arrays.copyOf(locked, lockedCount * 2);
        }
        locked[lockedCount++] = translation;
    }

    /**
     * Room for a payload of {@code length} bytes in the staging array ({@link #staging()}): where it
     * starts. The payload, once copied there, is {@link #staged(int, int)}, valid until {@link #flush}.
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

    /** The payload copied to [start, start + length) of the staging array. */
    ByteString staged(int start, int length) {
        return UnsafeByteOperations.unsafeWrap(staging, start, length);
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
            if (batch.getPacketsCount() > 0) {
                PacketBatch built = batch.build();
                batch = PacketBatch.newBuilder();
                if (PacketRouter.ALL_NODES.equals(peer)) {
                    nic.router().multicast(laneHint, built);
                } else {
                    nic.router().transmit(peer, laneHint, built);
                }
            }
        } finally {
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
