package io.pagewire.node.fabric;

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
 * their bytes are copied once, into the transport's buffers). Receiving reads each stream message
 * into one array and parses it with aliasing, so every packet's payload is a view of that array
 * rather than a copy of its own: the bytes are copied once more only when they land in a frame.
 * gRPC's default protobuf marshaller would copy each payload out of a reused buffer.
 */
final class LaneMarshaller implements MethodDescriptor.Marshaller<LaneFrame> {
    static final LaneMarshaller INSTANCE = new LaneMarshaller();
    private static final MethodDescriptor.Marshaller<LaneFrame> PROTO = ProtoUtils.marshaller(LaneFrame.getDefaultInstance());

    /** The Lane method with this marshaller on both directions. */
    static final MethodDescriptor<LaneFrame, LaneFrame> LANE = FabricGrpc.getLaneMethod().toBuilder(INSTANCE, INSTANCE).build();

    private LaneMarshaller() {
    }

    @Override
    public InputStream stream(LaneFrame value) {
        return PROTO.stream(value);
    }

    @Override
    public LaneFrame parse(InputStream stream) {
        try {
            byte[] message;
            if (stream instanceof KnownLength) {
                message = new byte[stream.available()];
                int read = stream.readNBytes(message, 0, message.length);
                if (read != message.length) {
                    throw new IOException("lane message ended after " + read + " of " + message.length + " bytes");
                }
            } else {
                message = stream.readAllBytes();
            }
            // An input over a buffer it knows to be immutable: only then does aliasing hand out views
            // (CodedInputStream.newInstance(byte[]) would still copy every payload).
            CodedInputStream in = UnsafeByteOperations.unsafeWrap(message).newCodedInput();
            in.enableAliasing(true);
            in.setSizeLimit(Integer.MAX_VALUE);
            return LaneFrame.parseFrom(in, ExtensionRegistryLite.getEmptyRegistry());
        } catch (IOException e) {
            throw Status.INTERNAL.withDescription("a lane frame could not be parsed: " + e.getMessage()).withCause(e).asRuntimeException();
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
