package io.pagewire.node.fabric;

import io.pagewire.node.nic.PacketBatch;
import io.pagewire.proto.fabric.LaneHello;

/**
 * One message on a lane, as the fabric handles it: the hello that opens the lane, or a batch of the
 * NIC's packets (fabric.proto's {@code LaneFrame}, whose bytes {@link LaneCodec} writes and reads).
 * A received batch is the receiving thread's and is valid until the lane's handler returns.
 */
final class LaneMessage {
    /** What a lane receives in place of bytes that are not a lane message; {@link LaneMarshaller#malformedReason()} says why. */
    static final LaneMessage MALFORMED = new LaneMessage(null, null);
    /** A message with neither body (protobuf's empty LaneFrame). */
    static final LaneMessage EMPTY = new LaneMessage(null, null);

    private final LaneHello hello;
    private final PacketBatch batch;

    private LaneMessage(LaneHello hello, PacketBatch batch) {
        this.hello = hello;
        this.batch = batch;
    }

    static LaneMessage hello(LaneHello hello) {
        return new LaneMessage(hello, null);
    }

    static LaneMessage batch(PacketBatch batch) {
        return new LaneMessage(null, batch);
    }

    boolean hasHello() {
        return hello != null;
    }

    LaneHello getHello() {
        return hello;
    }

    boolean hasBatch() {
        return batch != null;
    }

    PacketBatch getBatch() {
        return batch;
    }

    @Override
    public String toString() {
        return this == MALFORMED ? "malformed" : hello != null ? "hello from " + hello.getNodeId() : batch != null ? batch.toString() : "empty";
    }
}
