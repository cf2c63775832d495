package io.pagewire.node.fabric;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.nic.Packet;
import io.pagewire.node.nic.PacketBatch;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.LongStream;
import org.junit.jupiter.api.Test;

class FaultInjectorTest {
    private static PacketBatch batch(int first, int count) {
        PacketBatch b = new PacketBatch();
        for (int i = first; i < first + count; i++) {
            b.add().setPsn(i);
        }
        return b;
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
            out += faults.shape("p", batch(i * 100, 100)).size();
        }
        assertThat(faults.dropped()).isBetween(9_000L, 11_000L);
        assertThat(faults.duplicated()).isBetween(8_000L, 10_000L);
        assertThat(out).isEqualTo(100_000 - faults.dropped() + faults.duplicated());
    }

    @Test
    void reorderedPacketsGoOutAfterTheNextBatchAsCopies() {
        FaultInjector faults = new FaultInjector(new FabricContext().nodeId("n").reorderRate(0.5).faultSeed(7).conclude());
        byte[] staged = {42, 0, 0, 0, 0, 0, 0, 0};
        PacketBatch first = batch(0, 20);
        first.get(0).setPayload(staged, 0, staged.length);
        PacketBatch out1 = faults.shape("p", first);
        staged[0] = 99; // the staging array is reused once the send returns
        first.clear(); // and so are the batch's slots
        first.add().setPsn(1000);
        PacketBatch out2 = faults.shape("p", batch(20, 20));
        List<Long> order = new ArrayList<>();
        out1.forEach(p -> order.add(p.getPsn()));
        out2.forEach(p -> order.add(p.getPsn()));
        List<Long> rest = new ArrayList<>(order);
        faults.releaseHeld("p").forEach(p -> rest.add(p.getPsn()));
        assertThat(faults.reordered()).isPositive();
        assertThat(order).isNotEqualTo(order.stream().sorted().toList());
        assertThat(rest).containsExactlyInAnyOrderElementsOf(LongStream.range(0, 40).boxed().toList());
        for (Packet p : out2) {
            if (p.getPsn() == 0) {
                assertThat(p.payloadBytes()).as("held packet was copied before the staging array and the slot changed")
                        .containsExactly(42, 0, 0, 0, 0, 0, 0, 0);
            }
        }
    }
}
