package io.pagewire.node.nic;

import com.google.protobuf.ByteString;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Predicate;

/**
 * A wire between NICs in one JVM for protocol tests without gRPC: each node's inbound batches are
 * delivered in order on that node's own thread, payloads copied as a transport would. A test can drop
 * packets to exercise recovery.
 */
final class DirectLink implements AutoCloseable {
    private final Map<String, Nic> nics = new ConcurrentHashMap<>();
    private final Map<String, ExecutorService> inbound = new ConcurrentHashMap<>();
    volatile Predicate<Packet> drop = p -> false;

    PacketTransport transportFor(String from) {
        return new PacketTransport() {
            @Override
            public void send(String peer, int laneHint, PacketBatch batch) {
                PacketBatch.Builder copy = PacketBatch.newBuilder();
                for (Packet p : batch.getPacketsList()) {
                    if (!drop.test(p)) {
                        copy.addPackets(p.toBuilder().setPayload(ByteString.copyFrom(p.getPayload().asReadOnlyByteBuffer())));
                    }
                }
                PacketBatch delivered = copy.build();
                ExecutorService executor = inbound.get(peer);
                if (executor != null) {
                    executor.execute(() -> nics.get(peer).receive(from, delivered));
                }
            }

            @Override
            public boolean isWritable(String peer, int laneHint) {
                return true;
            }
        };
    }

    void add(String node, Nic nic) {
        nics.put(node, nic);
        inbound.put(node, Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "direct-link-" + node);
            t.setDaemon(true);
            return t;
        }));
    }

    @Override
    public void close() {
        inbound.values().forEach(ExecutorService::shutdownNow);
    }
}
