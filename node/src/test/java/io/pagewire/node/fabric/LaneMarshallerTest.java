package io.pagewire.node.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.google.protobuf.ByteString;
import io.pagewire.proto.fabric.LaneFrame;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The lane marshaller's receive side: payloads are views of the receiving thread's reused message array. */
class LaneMarshallerTest {
    private static final int PACKETS = 32;
    private static final int PAYLOAD = 4096;

    @Test
    void parsedPayloadsCarryTheBytesSent() throws Exception {
        LaneFrame sent = frame(0);
        LaneFrame parsed = LaneMarshaller.INSTANCE.parse(LaneMarshaller.INSTANCE.stream(sent));
        assertEquals(sent, parsed);
        LaneMarshaller.release(parsed);
    }

    /**
     * A 128 KiB lane message must cost neither a copy per payload (protobuf only aliases when its
     * input knows the buffer is immutable, and a plain byte-array input does not) nor, once its frame
     * is released, an array of its own: the receiving thread's array is reused.
     */
    @Test
    void parsingAReleasedFrameAfterAnotherAllocatesNothingTheSizeOfTheMessage() throws Exception {
        byte[] wire = frame(0).toByteArray();
        for (int i = 0; i < 200; i++) { // let the JIT settle so its own allocations are not counted
            LaneMarshaller.release(LaneMarshaller.INSTANCE.parse(known(wire)));
        }
        int rounds = 50;
        long before = allocatedBytes();
        for (int i = 0; i < rounds; i++) {
            LaneMarshaller.release(LaneMarshaller.INSTANCE.parse(known(wire)));
        }
        long perMessage = (allocatedBytes() - before) / rounds;
        assertTrue(perMessage < wire.length / 4, "parsing a " + wire.length + "-byte lane message allocated " + perMessage
                + " bytes: its payloads were copied, or its array was not reused");
    }

    /** Until its frame is released, the thread's array is not reused: a frame parsed meanwhile gets its own. */
    @Test
    void aFrameKeepsItsBytesUntilReleased() {
        LaneFrame first = LaneMarshaller.INSTANCE.parse(known(frame(1).toByteArray()));
        LaneFrame nested = LaneMarshaller.INSTANCE.parse(known(frame(2).toByteArray()));
        assertEquals(frame(1), first, "a frame parsed before the first was released overwrote it");
        assertEquals(frame(2), nested);
        LaneMarshaller.release(nested); // not the borrower: nothing happens
        assertEquals(frame(1), first);
        LaneMarshaller.release(first);
        LaneFrame third = LaneMarshaller.INSTANCE.parse(known(frame(3).toByteArray()));
        assertEquals(frame(3), third);
        assertEquals(frame(3).getBatch().getPackets(0).getPayload(), first.getBatch().getPackets(0).getPayload(),
                "the released frame's array was not reused");
        LaneMarshaller.release(third);
    }

    @Test
    void anUnparsableMessageSaysWhyAndLeavesTheArrayFree() {
        // Not thrown (gRPC would end the stream with UNKNOWN): the lane gets MALFORMED and ends the stream itself.
        LaneFrame malformed = LaneMarshaller.INSTANCE.parse(known(new byte[] {(byte) 0x0A, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF}));
        assertTrue(malformed == LaneMarshaller.MALFORMED);
        assertTrue(LaneMarshaller.malformedReason() != null && !LaneMarshaller.malformedReason().isEmpty(), LaneMarshaller.malformedReason());
        LaneFrame next = LaneMarshaller.INSTANCE.parse(known(frame(4).toByteArray()));
        LaneFrame after = LaneMarshaller.INSTANCE.parse(known(frame(5).toByteArray()));
        LaneMarshaller.release(next);
        LaneMarshaller.release(after);
        LaneFrame reusing = LaneMarshaller.INSTANCE.parse(known(frame(6).toByteArray()));
        assertEquals(frame(6).getBatch().getPackets(0).getPayload(), next.getBatch().getPackets(0).getPayload(),
                "the array stayed lent after a failed parse");
        LaneMarshaller.release(reusing);
    }

    private static long allocatedBytes() {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        return threads.getThreadAllocatedBytes(Thread.currentThread().getId());
    }

    /** A batch of full packets whose bytes depend on {@code seed}. */
    private static LaneFrame frame(int seed) {
        PacketBatch.Builder batch = PacketBatch.newBuilder();
        for (int i = 0; i < PACKETS; i++) {
            byte[] payload = new byte[PAYLOAD];
            Arrays.fill(payload, (byte) (seed * 31 + i));
            batch.addPackets(Packet.newBuilder().setPsn(i).setRemoteAddress(0x10000L + (long) i * PAYLOAD).setPayload(ByteString.copyFrom(payload)));
        }
        return LaneFrame.newBuilder().setBatch(batch).build();
    }

    /** An input stream that knows its length, as gRPC's are. */
    private static InputStream known(byte[] bytes) {
        return new KnownLengthStream(bytes);
    }

    /** An input stream over bytes that knows its length, as gRPC's are (the lane codec benchmark uses it too). */
    static final class KnownLengthStream extends ByteArrayInputStream implements io.grpc.KnownLength {
        KnownLengthStream(byte[] bytes) {
            super(bytes);
        }
    }
}
