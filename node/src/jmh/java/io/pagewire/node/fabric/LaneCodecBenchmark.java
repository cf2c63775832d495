package io.pagewire.node.fabric;

import com.google.protobuf.CodedInputStream;
import com.google.protobuf.ExtensionRegistryLite;
import com.google.protobuf.UnsafeByteOperations;
import io.grpc.Drainable;
import io.grpc.protobuf.ProtoUtils;
import io.pagewire.node.nic.Packet;
import io.pagewire.node.nic.PacketBatch;
import io.pagewire.proto.fabric.LaneFrame;
import io.pagewire.proto.fabric.Opcode;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * What a lane message costs the CPU beyond its bytes: one batch of 4 KiB packets (the default MTU and
 * batch) filled and drained as a sending node does (payloads viewing its staging array), and parsed and
 * scattered into frames as a receiving node does; beside it, the same through protobuf's generated
 * objects (how lanes were coded before {@link LaneCodec}), and copying the same bytes as often as the raw
 * gRPC baseline does (once into the transport on the sending side, once out of it on the receiving
 * side). The kernel's share (the sockets) is the same for all and not measured here.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class LaneCodecBenchmark {
    /** Packets per lane message (pagewire.nic.batchPackets' default is 32). */
    @Param({"32"})
    public int packets;

    private static final int PAYLOAD = 4096;

    /** Source frames, heap memory as the kernel agent's are. */
    private ByteBuffer frames;
    /** Destination frames. */
    private byte[] landed;
    /** Where serialisation writes, as gRPC's framer writes into the transport's buffers. */
    private ReusableSink sink;
    /** One encoded lane message, as the receiving side reads it off the wire. */
    private byte[] wire;
    /** The receiving side's reusable array, for the raw copy. */
    private byte[] received;

    @Setup
    public void setUp() {
        frames = ByteBuffer.allocate(packets * PAYLOAD);
        for (int i = 0; i < frames.capacity(); i++) {
            frames.put(i, (byte) i);
        }
        landed = new byte[packets * PAYLOAD];
        wire = buildProtobuf().toByteArray();
        sink = new ReusableSink(wire.length + 1024);
        received = new byte[wire.length];
    }

    /** The sending node's batch, its slots reused from message to message as an outbox's are. */
    private final PacketBatch batch = new PacketBatch();

    private PacketBatch fill() {
        batch.clear();
        for (int i = 0; i < packets; i++) {
            batch.add().setOpcode(Opcode.WRITE_MIDDLE).setSrcQpn(1).setDstQpn(2).setPsn(1000 + i)
                    .setRemoteAddress(0x7f0000000000L + (long) i * PAYLOAD).setRkey(0x1234)
                    .setPayload(frames.array(), i * PAYLOAD, PAYLOAD);
        }
        return batch;
    }

    private LaneFrame buildProtobuf() {
        io.pagewire.proto.fabric.PacketBatch.Builder built = io.pagewire.proto.fabric.PacketBatch.newBuilder();
        for (int i = 0; i < packets; i++) {
            built.addPackets(io.pagewire.proto.fabric.Packet.newBuilder().setOpcode(Opcode.WRITE_MIDDLE).setSrcQpn(1).setDstQpn(2)
                    .setPsn(1000 + i).setRemoteAddress(0x7f0000000000L + (long) i * PAYLOAD).setRkey(0x1234)
                    .setPayload(UnsafeByteOperations.unsafeWrap(frames.array(), i * PAYLOAD, PAYLOAD)));
        }
        return LaneFrame.newBuilder().setBatch(built).build();
    }

    /** Sending node: fill the batch's slots over the staged payloads and drain it into the transport's buffer. */
    @Benchmark
    public int encode() throws IOException {
        sink.reset();
        // As gRPC's message framer does: a Drainable stream writes itself into the transport's output.
        try (InputStream stream = LaneMarshaller.INSTANCE.stream(LaneMessage.batch(fill()))) {
            ((Drainable) stream).drainTo(sink);
        }
        return sink.size;
    }

    /** The same through protobuf's generated objects: a builder and a message per packet, serialised by protobuf. */
    @Benchmark
    public int encodeWithProtobuf() throws IOException {
        sink.reset();
        try (InputStream stream = ProtoUtils.marshaller(LaneFrame.getDefaultInstance()).stream(buildProtobuf())) {
            ((Drainable) stream).drainTo(sink);
        }
        return sink.size;
    }

    /** Receiving node: parse the lane message and copy every payload into its frame. */
    @Benchmark
    public int decodeAndScatter() {
        LaneMessage message = LaneMarshaller.INSTANCE.parse(new LaneMarshallerTest.KnownLengthStream(wire));
        int at = 0;
        PacketBatch received = message.getBatch();
        for (int i = 0; i < received.size(); i++) {
            Packet packet = received.get(i);
            System.arraycopy(packet.payloadArray(), packet.payloadOffset(), landed, at, packet.payloadLength());
            at += packet.payloadLength();
        }
        LaneMarshaller.release(message);
        return at;
    }

    /** The same through protobuf: an aliasing parse into a message per packet, each payload a view. */
    @Benchmark
    public int decodeWithProtobufAndScatter() throws IOException {
        byte[] copy = received;
        System.arraycopy(wire, 0, copy, 0, wire.length); // as the marshaller reads the stream into its array
        CodedInputStream in = UnsafeByteOperations.unsafeWrap(copy, 0, wire.length).newCodedInput();
        in.enableAliasing(true);
        LaneFrame frame = LaneFrame.parseFrom(in, ExtensionRegistryLite.getEmptyRegistry());
        int at = 0;
        for (io.pagewire.proto.fabric.Packet packet : frame.getBatch().getPacketsList()) {
            packet.getPayload().copyTo(landed, at);
            at += packet.getPayload().size();
        }
        return at;
    }

    /** The raw baseline's user-space work for the same bytes: one copy in on the sending side, one out on the receiving side. */
    @Benchmark
    public int rawCopies() {
        sink.reset();
        sink.write(frames.array(), 0, frames.capacity());
        System.arraycopy(sink.bytes, 0, received, 0, frames.capacity());
        return received[received.length - 1];
    }

    /** An output stream over one array, emptied before each use. */
    private static final class ReusableSink extends OutputStream {
        final byte[] bytes;
        int size;

        ReusableSink(int capacity) {
            bytes = new byte[capacity];
        }

        void reset() {
            size = 0;
        }

        @Override
        public void write(int b) {
            bytes[size++] = (byte) b;
        }

        @Override
        public void write(byte[] b, int off, int len) {
            System.arraycopy(b, off, bytes, size, len);
            size += len;
        }
    }
}
