package io.pagewire.node.nic;

import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import java.util.Arrays;

/**
 * The packets a queue pair has built for its peer and not yet sent, with the DMA locks on the frames
 * their payloads wrap. {@link #flush} hands them to the transport as one batch and then releases the
 * locks: the transport reads the payloads before it returns.
 */
final class Outbox {
    private final Nic nic;
    private final DmaEngine dma;
    private volatile int laneHint;
    private String peer;
    private PacketBatch.Builder batch = PacketBatch.newBuilder();
    private long[] locked = new long[8];
    private int lockedCount;

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

    /** Sends what was built (if anything) and releases the DMA locks held for it. */
    void flush() {
        try {
            if (batch.getPacketsCount() > 0) {
                PacketBatch built = batch.build();
                batch = PacketBatch.newBuilder();
                nic.router().transmit(peer, laneHint, built);
            }
        } finally {
            for (int i = 0; i < lockedCount; i++) {
                dma.release(locked[i], false);
            }
            lockedCount = 0;
        }
    }
}
