package io.pagewire.node.fabric;

import com.google.protobuf.ByteString;
import com.google.protobuf.CodedInputStream;
import com.google.protobuf.ExtensionRegistryLite;
import com.google.protobuf.UnsafeByteOperations;
import io.grpc.KnownLength;
import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.ServiceDescriptor;
import io.grpc.Status;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ServerCalls;
import io.pagewire.proto.fabric.FabricGrpc;
import io.pagewire.proto.fabric.LaneFrame;
import java.io.IOException;
import java.io.InputStream;

/**
 * How lane frames cross the wire. Sending is protobuf's own serialisation (payloads wrap frames, so
 * their bytes are copied once, into the transport's buffers). Receiving copies each stream message
 * into one array, the receiving thread's own and reused from message to message, and parses it with
 * aliasing, so every packet's payload is a view of that array: the bytes are copied once more only
 * when they land in a frame, and a message allocates nothing the size of its payloads (gRPC's default
 * marshaller would copy each payload out again). A frame that borrowed the thread's array must be given back with {@link #release} once
 * nothing reads its payloads (the lane's {@code onNext} does, on the same thread), and a packet kept
 * beyond that must copy its payload.
 */
final class LaneMarshaller implements MethodDescriptor.Marshaller<LaneFrame> {
    static final LaneMarshaller INSTANCE = new LaneMarshaller();
    private static final MethodDescriptor.Marshaller<LaneFrame> PROTO = ProtoUtils.marshaller(LaneFrame.getDefaultInstance());
    /** Messages larger than this get an array of their own rather than growing a thread's for good. */
    private static final int LARGEST_REUSED_BYTES = 4 << 20;

    /** The Lane method with this marshaller on both directions. */
    static final MethodDescriptor<LaneFrame, LaneFrame> LANE = FabricGrpc.getLaneMethod().toBuilder(INSTANCE, INSTANCE).build();

    /**
     * Each receiving thread's message array. gRPC parses a message and hands it to the lane's observer
     * on the same thread, one after the other, so the array is lent to one frame at a time; a parse
     * while it is lent (a delivery nested in another) takes a fresh array instead.
     */
    private static final ThreadLocal<ReceiveBuffer> BUFFERS = ThreadLocal.withInitial(ReceiveBuffer::new);

    private LaneMarshaller() {
    }

    @Override
    public InputStream stream(LaneFrame value) {
        return PROTO.stream(value);
    }

    @Override
    public LaneFrame parse(InputStream stream) {
        try {
            if (!(stream instanceof KnownLength)) {
                return parse(UnsafeByteOperations.unsafeWrap(stream.readAllBytes()));
            }
            int size = stream.available();
            ReceiveBuffer buffer = BUFFERS.get();
            boolean lend = buffer.lentTo == null && size <= LARGEST_REUSED_BYTES;
            byte[] message = lend ? buffer.atLeast(size) : new byte[size];
            int read = stream.readNBytes(message, 0, size);
            if (read != size) {
                throw new IOException("lane message ended after " + read + " of " + size + " bytes");
            }
            // An input over a buffer it knows to be immutable: only then does aliasing hand out views
            // (CodedInputStream.newInstance(byte[]) would still copy every payload).
            LaneFrame frame = parse(UnsafeByteOperations.unsafeWrap(message, 0, size));
            if (lend) {
                buffer.lentTo = frame;
            }
            return frame;
        } catch (IOException e) {
            // Not thrown: gRPC would end the stream with UNKNOWN "Application error processing RPC".
            // The lane sees MALFORMED and ends the stream itself, saying why.
            BUFFERS.get().malformed = e.getMessage();
            return MALFORMED;
        }
    }

    private static LaneFrame parse(ByteString message) throws IOException {
        CodedInputStream in = message.newCodedInput();
        in.enableAliasing(true);
        in.setSizeLimit(Integer.MAX_VALUE);
        return LaneFrame.parseFrom(in, ExtensionRegistryLite.getEmptyRegistry());
    }

    /** What a lane receives in place of bytes that are not a LaneFrame; {@link #malformedReason()} says why. */
    static final LaneFrame MALFORMED = LaneFrame.newBuilder().build();

    /** Why the last frame this thread parsed was {@link #MALFORMED}. */
    static String malformedReason() {
        return BUFFERS.get().malformed;
    }

    /**
     * Gives the receiving thread's array back from a frame; call on that thread once nothing reads
     * the frame's payloads any more (the next message overwrites them). Other frames are ignored.
     */
    static void release(LaneFrame frame) {
        ReceiveBuffer buffer = BUFFERS.get();
        if (buffer.lentTo == frame) {
            buffer.lentTo = null;
        }
    }

    /** One thread's reusable message array and the frame it is lent to, if any. */
    private static final class ReceiveBuffer {
        private byte[] bytes = new byte[0];
        private LaneFrame lentTo;
        private String malformed;

        byte[] atLeast(int size) {
            if (bytes.length < size) {
                bytes = new byte[Math.min(LARGEST_REUSED_BYTES, Math.max(size, bytes.length * 2))];
            }
            return bytes;
        }
    }

    /** The Fabric service bound to the lane handler with this marshaller (reflection still sees fabric.proto). */
    static ServerServiceDefinition service(ServerCalls.BidiStreamingMethod<LaneFrame, LaneFrame> lane) {
        ServiceDescriptor descriptor = ServiceDescriptor.newBuilder(FabricGrpc.SERVICE_NAME)
                .setSchemaDescriptor(FabricGrpc.getServiceDescriptor().getSchemaDescriptor())
                .addMethod(LANE)
                .build();
        return ServerServiceDefinition.builder(descriptor).addMethod(LANE, ServerCalls.asyncBidiStreamingCall(lane)).build();
    }
}
