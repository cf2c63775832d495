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
import org.junit.jupiter.api.Test;

/** The lane marshaller's receive side: payloads are views of the one array a message is read into. */
class LaneMarshallerTest {
    private static final int PACKETS = 32;
    private static final int PAYLOAD = 4096;

    @Test
    void parsedPayloadsCarryTheBytesSent() throws Exception {
        LaneFrame sent = frame();
        LaneFrame parsed = LaneMarshaller.INSTANCE.parse(LaneMarshaller.INSTANCE.stream(sent));
        assertEquals(sent, parsed);
    }

    /**
     * A 128 KiB lane message must cost one 128 KiB array, not a second copy per payload: protobuf
     * only aliases when its input knows the buffer is immutable, and a plain byte-array input does not.
     */
    @Test
    void parsingAllocatesTheMessageOnceNotOncePerPayload() throws Exception {
        byte[] wire = frame().toByteArray();
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long tid = Thread.currentThread().getId();
        for (int i = 0; i < 200; i++) { // let the JIT settle so its own allocations are not counted
            LaneMarshaller.INSTANCE.parse(known(wire));
        }
        int rounds = 50;
        long before = threads.getThreadAllocatedBytes(tid);
        for (int i = 0; i < rounds; i++) {
            LaneMarshaller.INSTANCE.parse(known(wire));
        }
        long perMessage = (threads.getThreadAllocatedBytes(tid) - before) / rounds;
        assertTrue(perMessage < wire.length * 3L / 2, "parsing a " + wire.length + "-byte lane message allocated " + perMessage
                + " bytes: payloads are being copied out of the message instead of aliased");
    }

    private static LaneFrame frame() {
        PacketBatch.Builder batch = PacketBatch.newBuilder();
        for (int i = 0; i < PACKETS; i++) {
            byte[] payload = new byte[PAYLOAD];
            java.util.Arrays.fill(payload, (byte) i);
            batch.addPackets(Packet.newBuilder().setPsn(i).setRemoteAddress(0x10000L + (long) i * PAYLOAD).setPayload(ByteString.copyFrom(payload)));
        }
        return LaneFrame.newBuilder().setBatch(batch).build();
    }

    /** An input stream that knows its length, as gRPC's are. */
    private static InputStream known(byte[] bytes) {
        return new KnownLengthStream(bytes);
    }

    private static final class KnownLengthStream extends ByteArrayInputStream implements io.grpc.KnownLength {
        KnownLengthStream(byte[] bytes) {
            super(bytes);
        }
    }
}
