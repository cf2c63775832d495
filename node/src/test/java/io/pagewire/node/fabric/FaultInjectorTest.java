package io.pagewire.node.fabric;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;

class FaultInjectorTest {
    private static PacketBatch batch(int first, int count) {
        PacketBatch.Builder b = PacketBatch.newBuilder();
        for (int i = first; i < first + count; i++) {
            b.addPackets(Packet.newBuilder().setPsn(i));
        }
        return b.build();
    }

    @Test
    void offByDefault() {
        FaultInjector faults = new FaultInjector(new FabricContext().nodeId("n").conclude());
        assertThat(faults.shapes()).isFalse();
        assertThat(faults.delays()).isFalse();
        faults.rates(0.5, 0, 0);
        faults.delay(1_000, 0);
        assertThat(faults.shapes()).as("knobs change while the node runs").isTrue();
        assertThat(faults.delays()).isTrue();
    }

    @Test
    void lossAndDuplicationHappenAtAboutTheirRates() {
        FaultInjector faults = new FaultInjector(new FabricContext().nodeId("n").lossRate(0.1).duplicateRate(0.1).conclude());
        int out = 0;
        for (int i = 0; i < 1000; i++) {
            out += faults.shape("p", batch(i * 100, 100)).getPacketsCount();
        }
        assertThat(faults.dropped()).isBetween(9_000L, 11_000L);
        assertThat(faults.duplicated()).isBetween(8_000L, 10_000L);
        assertThat(out).isEqualTo(100_000 - faults.dropped() + faults.duplicated());
    }

    @Test
    void reorderedPacketsGoOutAfterTheNextBatchAsCopies() {
        FaultInjector faults = new FaultInjector(new FabricContext().nodeId("n").reorderRate(0.5).faultSeed(7).conclude());
        ByteBuffer frame = ByteBuffer.allocateDirect(8).putLong(0, 42);
        PacketBatch first = PacketBatch.newBuilder()
                .addPackets(Packet.newBuilder().setPsn(0).setPayload(UnsafeByteOperations.unsafeWrap(frame.duplicate())))
                .addAllPackets(batch(1, 19).getPacketsList()).build();
        PacketBatch out1 = faults.shape("p", first);
        frame.putLong(0, 99); // the frame is reused once the send returns
        PacketBatch out2 = faults.shape("p", batch(20, 20));
        List<Long> order = new ArrayList<>();
        out1.getPacketsList().forEach(p -> order.add(p.getPsn()));
        out2.getPacketsList().forEach(p -> order.add(p.getPsn()));
        List<Long> rest = new ArrayList<>(order);
        faults.releaseHeld("p").forEach(p -> rest.add(p.getPsn()));
        assertThat(faults.reordered()).isPositive();
        assertThat(order).isNotEqualTo(order.stream().sorted().toList());
        assertThat(rest).containsExactlyInAnyOrderElementsOf(LongStream.range(0, 40).boxed().toList());
        for (PacketBatch b : List.of(out1, out2)) {
            for (Packet p : b.getPacketsList()) {
                if (p.getPsn() == 0 && b == out2) {
                    assertThat(p.getPayload()).as("held packet was copied before the frame changed")
                            .isEqualTo(ByteString.copyFrom(ByteBuffer.allocate(8).putLong(0, 42)));
                }
            }
        }
    }
}
