package io.pagewire.node.fabric;

import com.google.protobuf.CodedInputStream;
import io.grpc.Drainable;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServiceDescriptor;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ServerCalls;
import io.pagewire.node.nic.PacketBatch;
import io.pagewire.proto.fabric.FabricGrpc;
import io.pagewire.proto.fabric.LaneFrame;
import io.pagewire.proto.fabric.LaneHello;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;

/**
 * How lane messages cross the wire, in fabric.proto's encoding ({@link LaneCodec}). Sending drains a
 * batch into the transport's buffers: headers through a small array of the sending thread's, each
 * payload straight from the array the NIC staged it in, so its bytes are copied once. Receiving copies
 * each stream message into one array, the receiving thread's own and reused from message to message,
 * and decodes its packets into the thread's own {@link PacketBatch}, whose payloads are views of that
 * array: the bytes are copied once more only when they land in a frame, and a message allocates nothing
 * per packet. A message that borrowed the thread's array and batch must be given back with
 * {@link #release} once nothing reads them (the lane's {@code onNext} does, on the same thread); a packet
 * kept beyond that must be copied.
 */
final class LaneMarshaller implements MethodDescriptor.Marshaller<LaneMessage> {
    static final LaneMarshaller INSTANCE = new LaneMarshaller();
    private static final MethodDescriptor.Marshaller<LaneFrame> PROTO = ProtoUtils.marshaller(LaneFrame.getDefaultInstance());
    /** Messages larger than this get an array of their own rather than growing a thread's for good. */
    private static final int LARGEST_REUSED_BYTES = 4 << 20;

    /** The Lane method with this marshaller on both directions. */
    static final MethodDescriptor<LaneMessage, LaneMessage> LANE = FabricGrpc.getLaneMethod().toBuilder(INSTANCE, INSTANCE).build();

    /**
     * Each receiving thread's message array and batch. gRPC parses a message and hands it to the lane's
     * observer on the same thread, one after the other, so they are lent to one message at a time; a
     * parse while they are lent (a delivery nested in another) takes fresh ones instead.
     */
    private static final ThreadLocal<ReceiveBuffer> BUFFERS = ThreadLocal.withInitial(ReceiveBuffer::new);
    /** Each sending thread's array for the headers between payloads. */
    private static final ThreadLocal<byte[]> SCRATCH = ThreadLocal.withInitial(() -> new byte[LaneCodec.SCRATCH_BYTES]);

    private LaneMarshaller() {
    }

    @Override
    public InputStream stream(LaneMessage value) {
        if (value.hasBatch()) {
            return new BatchStream(new LaneCodec.BatchWriter(value.getBatch()));
        }
        LaneFrame frame = value.hasHello() ? LaneFrame.newBuilder().setHello(value.getHello()).build() : LaneFrame.getDefaultInstance();
        return PROTO.stream(frame);
    }

    @Override
    public LaneMessage parse(InputStream stream) {
        ReceiveBuffer buffer = BUFFERS.get();
        try {
            byte[] message;
            int size;
            boolean lend;
            if (stream instanceof KnownLength) {
                size = stream.available();
                lend = buffer.lentTo == null && size <= LARGEST_REUSED_BYTES;
                message = lend ? buffer.atLeast(size) : new byte[size];
                int read = stream.readNBytes(message, 0, size);
                if (read != size) {
                    throw new IOException("lane message ended after " + read + " of " + size + " bytes");
                }
            } else {
                message = stream.readAllBytes();
                size = message.length;
                lend = false;
            }
            PacketBatch batch = lend ? buffer.batch : new PacketBatch();
            batch.clear();
            long body = LaneCodec.readFrame(message, 0, size, batch);
            if (body == LaneCodec.NO_BODY) {
                return LaneMessage.EMPTY;
            }
            if (body != LaneCodec.BATCH) {
                CodedInputStream hello = CodedInputStream.newInstance(message, (int) (body >>> 32), (int) body);
                return LaneMessage.hello(LaneHello.parseFrom(hello));
            }
            LaneMessage received = LaneMessage.batch(batch);
            if (lend) {
                buffer.lentTo = received;
            }
            return received;
        } catch (IOException e) {
            // Not thrown: gRPC would end the stream with UNKNOWN "Application error processing RPC".
            // The lane sees MALFORMED and ends the stream itself, saying why.
            buffer.malformed = e.getMessage();
            return LaneMessage.MALFORMED;
        }
    }

    /** Why the last message this thread parsed was {@link LaneMessage#MALFORMED}. */
    static String malformedReason() {
        return BUFFERS.get().malformed;
    }

    /**
     * Gives the receiving thread's array and batch back from a message; call on that thread once nothing
     * reads the message's packets any more (the next message overwrites them). Other messages are ignored.
     */
    static void release(LaneMessage message) {
        ReceiveBuffer buffer = BUFFERS.get();
        if (buffer.lentTo == message) {
            buffer.lentTo = null;
        }
    }

    /** One thread's reusable message array and packet slots, and the message they are lent to, if any. */
    private static final class ReceiveBuffer {
        private byte[] bytes = new byte[0];
        private final PacketBatch batch = new PacketBatch();
        private LaneMessage lentTo;
        private String malformed;

        byte[] atLeast(int size) {
            if (bytes.length < size) {
                bytes = new byte[Math.min(LARGEST_REUSED_BYTES, Math.max(size, bytes.length * 2))];
            }
            return bytes;
        }
    }

    /**
     * A batch on its way out: drained into the transport's stream (gRPC over Netty does, within the
     * send), or, for a transport that reads instead, encoded into an array at the first read.
     */
    private static final class BatchStream extends InputStream implements Drainable, KnownLength {
        private final LaneCodec.BatchWriter writer;
        private byte[] encoded;
        private int at;
        private boolean drained;

        BatchStream(LaneCodec.BatchWriter writer) {
            this.writer = writer;
        }

        @Override
        public int drainTo(OutputStream target) throws IOException {
            if (encoded != null || drained) {
                int left = available();
                if (left > 0) {
                    target.write(encoded, at, left);
                    at = encoded.length;
                }
                return left;
            }
            drained = true;
            writer.writeTo(target, SCRATCH.get());
            return writer.size();
        }

        @Override
        public int available() {
            if (encoded != null) {
                return encoded.length - at;
            }
            return drained ? 0 : writer.size();
        }

        @Override
        public int read() {
            if (!encode()) {
                return -1;
            }
            return encoded[at++] & 0xFF;
        }

        @Override
        public int read(byte[] into, int offset, int length) {
            if (length == 0) {
                return 0;
            }
            if (!encode()) {
                return -1;
            }
            int n = Math.min(length, encoded.length - at);
            System.arraycopy(encoded, at, into, offset, n);
            at += n;
            return n;
        }

        /** Whether bytes are left to read, encoding the batch at the first read. */
        private boolean encode() {
            if (encoded == null) {
                if (drained) {
                    return false;
                }
                encoded = writer.toByteArray();
            }
            return at < encoded.length;
        }
    }

    /** The Fabric service bound to the lane handler with this marshaller (reflection still sees fabric.proto). */
    static ServerServiceDefinition service(ServerCalls.BidiStreamingMethod<LaneMessage, LaneMessage> lane) {
        ServiceDescriptor descriptor = ServiceDescriptor.newBuilder(FabricGrpc.SERVICE_NAME)
                .setSchemaDescriptor(FabricGrpc.getServiceDescriptor().getSchemaDescriptor())
                .addMethod(LANE)
                .build();
        return ServerServiceDefinition.builder(descriptor).addMethod(LANE, ServerCalls.asyncBidiStreamingCall(lane)).build();
    }
}
