package io.pagewire.node.fabric;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedOutputStream;
import io.pagewire.node.nic.Packet;
import io.pagewire.node.nic.PacketBatch;
import io.pagewire.node.nic.WirePackets;
import io.pagewire.proto.fabric.LaneFrame;
import io.pagewire.proto.fabric.LaneHello;
import io.pagewire.proto.fabric.Opcode;
import io.pagewire.proto.fabric.Syndrome;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * The lane's bytes are fabric.proto's, written and read without a protobuf object per packet: what the
 * codec writes, protobuf reads as the same LaneFrame, and what protobuf writes (fields in any order,
 * unknown ones, a field twice) the codec reads as protobuf would; received payloads are views of the
 * receiving thread's reused array and packets its reused slots.
 */
class LaneMarshallerTest {
    private static final int PACKETS = 32;
    private static final int PAYLOAD = 4096;

    @Test
    void whatTheCodecWritesProtobufReadsAsTheSameFrameAndBack() throws Exception {
        for (long seed = 0; seed < 50; seed++) {
            List<io.pagewire.proto.fabric.Packet> packets = WirePackets.randomProto(new Random(seed), 1 + (int) (seed % 7));
            LaneFrame proto = LaneFrame.newBuilder().setBatch(io.pagewire.proto.fabric.PacketBatch.newBuilder().addAllPackets(packets)).build();
            PacketBatch batch = new PacketBatch();
            packets.forEach(p -> WirePackets.fromProto(p, batch.add()));

            byte[] drained = drain(LaneMarshaller.INSTANCE.stream(LaneMessage.batch(batch)));
            assertThat(LaneFrame.parseFrom(drained)).as("protobuf reads what the codec drains, seed " + seed).isEqualTo(proto);
            assertThat(LaneMarshaller.INSTANCE.stream(LaneMessage.batch(batch)).readAllBytes()).as("reading gives the drained bytes")
                    .isEqualTo(drained);
            assertThat(drained.length).as("the size the stream announced").isEqualTo(proto.getSerializedSize());

            LaneMessage parsed = LaneMarshaller.INSTANCE.parse(known(proto.toByteArray()));
            assertThat(parsed.hasBatch()).isTrue();
            assertThat(WirePackets.toProto(parsed.getBatch())).as("the codec reads what protobuf writes, seed " + seed).isEqualTo(packets);
            LaneMarshaller.release(parsed);
        }
    }

    @Test
    void readingFollowsProtobufsRulesForOrderUnknownFieldsAndRepeats() throws Exception {
        // A packet written field by field, out of order, with unknown fields of every wire type, a group,
        // psn twice (the last wins) and an opcode this build does not know.
        ByteArrayOutputStream packetBytes = new ByteArrayOutputStream();
        CodedOutputStream p = CodedOutputStream.newInstance(packetBytes);
        p.writeBytes(8, ByteString.copyFromUtf8("payload"));
        p.writeUInt64(3, 7);
        p.writeUInt64(99, 12345);
        p.writeFixed64(98, 1);
        p.writeFixed32(97, 2);
        p.writeBytes(96, ByteString.copyFromUtf8("unknown"));
        p.writeGroup(95, LaneHello.newBuilder().setNodeId("inside a group").build());
        p.writeUInt32(1, 0xFFFF_FFFE);
        p.writeEnum(4, 1000);
        p.writeUInt64(3, 8);
        p.writeString(5, "a known number with the wrong wire type is skipped");
        p.writeFixed32(17, 0xCAFE);
        p.flush();
        ByteArrayOutputStream frameBytes = new ByteArrayOutputStream();
        CodedOutputStream f = CodedOutputStream.newInstance(frameBytes);
        f.writeUInt32(77, 1); // unknown field of the frame
        // Two batch fields: protobuf merges them, so both packets are there.
        f.writeBytes(2, batchOf(packetBytes.toByteArray()));
        f.writeBytes(2, batchOf(LanePacket.opcodeOnly(Opcode.ACKNOWLEDGE)));
        f.flush();
        byte[] wire = frameBytes.toByteArray();

        LaneFrame proto = LaneFrame.parseFrom(wire);
        LaneMessage parsed = LaneMarshaller.INSTANCE.parse(known(wire));
        assertThat(parsed.getBatch().size()).isEqualTo(2);
        Packet first = parsed.getBatch().get(0);
        assertThat(first.getPsn()).as("the last psn").isEqualTo(8);
        assertThat(first.getDstQpn()).isEqualTo(0xFFFF_FFFE);
        assertThat(first.getOpcode()).isEqualTo(Opcode.UNRECOGNIZED);
        assertThat(first.getOpcodeValue()).isEqualTo(1000);
        assertThat(first.getRemoteAddress()).as("a string where a varint belongs is an unknown field").isZero();
        assertThat(first.getImmediate()).isEqualTo(0xCAFE);
        assertThat(new String(first.payloadBytes())).isEqualTo("payload");
        assertThat(parsed.getBatch().get(1).getOpcode()).isEqualTo(Opcode.ACKNOWLEDGE);
        assertThat(WirePackets.toProto(parsed.getBatch())).as("what protobuf itself reads, unknown fields aside")
                .isEqualTo(proto.getBatch().getPacketsList().stream().map(q -> q.toBuilder().setUnknownFields(
                        com.google.protobuf.UnknownFieldSet.getDefaultInstance()).build()).toList());
        LaneMarshaller.release(parsed);
    }

    @Test
    void helloAndEmptyFramesAreToldApart() throws Exception {
        LaneHello hello = LaneHello.newBuilder().setNodeId("node-7").setLaneIndex(3).setIncarnation(99).build();
        LaneMessage parsed = LaneMarshaller.INSTANCE.parse(LaneMarshaller.INSTANCE.stream(LaneMessage.hello(hello)));
        assertThat(parsed.hasHello()).isTrue();
        assertThat(parsed.getHello()).isEqualTo(hello);
        LaneMessage empty = LaneMarshaller.INSTANCE.parse(known(new byte[0]));
        assertThat(empty.hasHello() || empty.hasBatch()).isFalse();
        LaneMessage emptyBatch = LaneMarshaller.INSTANCE.parse(known(LaneFrame.newBuilder()
                .setBatch(io.pagewire.proto.fabric.PacketBatch.getDefaultInstance()).build().toByteArray()));
        assertThat(emptyBatch.hasBatch()).isTrue();
        assertThat(emptyBatch.getBatch().isEmpty()).isTrue();
        LaneMarshaller.release(emptyBatch);
    }

    /**
     * A 128 KiB lane message must cost neither a copy per payload nor an object per packet nor, once its
     * message is released, an array of its own: the receiving thread's array and packet slots are reused.
     */
    @Test
    void parsingAReleasedMessageAfterAnotherAllocatesNothingPerPacket() throws Exception {
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
        assertThat(perMessage).as("bytes allocated to parse a %d-byte lane message of %d packets: a payload copied, a packet built,"
                + " or the array not reused", wire.length, PACKETS).isLessThan(PACKETS * 16L);
    }

    /** Sending drains headers and payloads into the transport's stream without an object per packet or a copy of the batch. */
    @Test
    void drainingABatchAllocatesNothingPerPacket() throws Exception {
        PacketBatch batch = new PacketBatch();
        byte[] staging = new byte[PACKETS * PAYLOAD];
        for (int i = 0; i < PACKETS; i++) {
            batch.add().setPsn(i).setOpcode(Opcode.WRITE_MIDDLE).setRemoteAddress(0x10000L + (long) i * PAYLOAD).setRkey(0x1234)
                    .setPayload(staging, i * PAYLOAD, PAYLOAD);
        }
        NullOutput sink = new NullOutput();
        for (int i = 0; i < 200; i++) {
            ((io.grpc.Drainable) LaneMarshaller.INSTANCE.stream(LaneMessage.batch(batch))).drainTo(sink);
        }
        int rounds = 50;
        long before = allocatedBytes();
        for (int i = 0; i < rounds; i++) {
            ((io.grpc.Drainable) LaneMarshaller.INSTANCE.stream(LaneMessage.batch(batch))).drainTo(sink);
        }
        long perBatch = (allocatedBytes() - before) / rounds;
        assertThat(perBatch).as("bytes allocated to drain a batch of %d packets", PACKETS).isLessThan(PACKETS * 16L);
        assertThat(sink.bytes).as("payload bytes went out").isGreaterThan(250L * PACKETS * PAYLOAD);
    }

    /** Until its message is released, the thread's array and slots are not reused: a message parsed meanwhile gets its own. */
    @Test
    void aMessageKeepsItsBytesUntilReleased() {
        LaneMessage first = LaneMarshaller.INSTANCE.parse(known(frame(1).toByteArray()));
        LaneMessage nested = LaneMarshaller.INSTANCE.parse(known(frame(2).toByteArray()));
        assertThat(WirePackets.toProto(first.getBatch())).as("a message parsed before the first was released overwrote it")
                .isEqualTo(frame(1).getBatch().getPacketsList());
        assertThat(WirePackets.toProto(nested.getBatch())).isEqualTo(frame(2).getBatch().getPacketsList());
        LaneMarshaller.release(nested); // not the borrower: nothing happens
        assertThat(WirePackets.toProto(first.getBatch())).isEqualTo(frame(1).getBatch().getPacketsList());
        LaneMarshaller.release(first);
        LaneMessage third = LaneMarshaller.INSTANCE.parse(known(frame(3).toByteArray()));
        assertThat(third.getBatch()).as("the released message's slots were not reused").isSameAs(first.getBatch());
        assertThat(WirePackets.toProto(third.getBatch())).isEqualTo(frame(3).getBatch().getPacketsList());
        LaneMarshaller.release(third);
    }

    @Test
    void anUnparsableMessageSaysWhyAndLeavesTheArrayFree() {
        // Not thrown (gRPC would end the stream with UNKNOWN): the lane gets MALFORMED and ends the stream itself.
        for (byte[] bad : List.of(new byte[] {(byte) 0x12, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF}, // a length past the end
                new byte[] {(byte) 0x12, 0x03, 0x0A, 0x05, 0x00}, // a packet longer than its batch
                new byte[] {(byte) 0x12, 0x02, 0x0A, (byte) 0x80}, // a varint cut short
                new byte[] {0x13, 0x10, 0x01}, // a group never ended
                new byte[] {0x00, 0x01})) { // field number 0
            LaneMessage malformed = LaneMarshaller.INSTANCE.parse(known(bad));
            assertThat(malformed).as(Arrays.toString(bad)).isSameAs(LaneMessage.MALFORMED);
            assertThat(LaneMarshaller.malformedReason()).isNotBlank();
        }
        LaneMessage next = LaneMarshaller.INSTANCE.parse(known(frame(4).toByteArray()));
        LaneMarshaller.release(next);
        LaneMessage reusing = LaneMarshaller.INSTANCE.parse(known(frame(6).toByteArray()));
        assertThat(reusing.getBatch()).as("the slots stayed lent after a failed parse").isSameAs(next.getBatch());
        LaneMarshaller.release(reusing);
    }

    private static ByteString batchOf(byte[] packet) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        CodedOutputStream out = CodedOutputStream.newInstance(bytes);
        out.writeBytes(1, ByteString.copyFrom(packet));
        out.flush();
        return ByteString.copyFrom(bytes.toByteArray());
    }

    private static long allocatedBytes() {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        return threads.getThreadAllocatedBytes(Thread.currentThread().getId());
    }

    private static byte[] drain(InputStream stream) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ((io.grpc.Drainable) stream).drainTo(out);
        return out.toByteArray();
    }

    /** A batch of full packets whose bytes depend on {@code seed}. */
    private static LaneFrame frame(int seed) {
        io.pagewire.proto.fabric.PacketBatch.Builder batch = io.pagewire.proto.fabric.PacketBatch.newBuilder();
        for (int i = 0; i < PACKETS; i++) {
            byte[] payload = new byte[PAYLOAD];
            Arrays.fill(payload, (byte) (seed * 31 + i));
            batch.addPackets(io.pagewire.proto.fabric.Packet.newBuilder().setPsn(i).setOpcode(Opcode.WRITE_MIDDLE)
                    .setSyndrome(Syndrome.SYNDROME_UNSPECIFIED).setRemoteAddress(0x10000L + (long) i * PAYLOAD).setPayload(ByteString.copyFrom(payload)));
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

    /** Counts what is written and keeps nothing. */
    private static final class NullOutput extends java.io.OutputStream {
        long bytes;

        @Override
        public void write(int b) {
            bytes++;
        }

        @Override
        public void write(byte[] b, int off, int len) {
            bytes += len;
        }
    }

    /** One packet's bytes with only an opcode. */
    private static final class LanePacket {
        static byte[] opcodeOnly(Opcode opcode) {
            return io.pagewire.proto.fabric.Packet.newBuilder().setOpcode(opcode).build().toByteArray();
        }
    }
}
