package io.pagewire.node.fabric;

import io.pagewire.node.nic.Packet;
import io.pagewire.node.nic.PacketBatch;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Fault injection on the send path, part of the product so that tests and the container testbed run
 * the same code: loss, duplication and reordering per packet, delay per batch, and cut links. Off
 * unless configured; every knob can also be changed while the node runs.
 */
public final class FaultInjector {
    private final SplittableRandom random;
    private final Set<String> cut = ConcurrentHashMap.newKeySet();
    private final Map<String, List<Packet>> heldBack = new HashMap<>();
    private volatile double lossRate;
    private volatile double duplicateRate;
    private volatile double reorderRate;
    private volatile long delayNs;
    private volatile long delayJitterNs;
    private final AtomicLong dropped = new AtomicLong();
    private final AtomicLong duplicated = new AtomicLong();
    private final AtomicLong reordered = new AtomicLong();
    private final AtomicLong delayed = new AtomicLong();

    FaultInjector(FabricContext context) {
        this.random = new SplittableRandom(context.faultSeed());
        this.lossRate = context.lossRate();
        this.duplicateRate = context.duplicateRate();
        this.reorderRate = context.reorderRate();
        this.delayNs = context.delayNs();
        this.delayJitterNs = context.delayJitterNs();
        this.cut.addAll(context.cutLinks());
    }

    /** Sets the per-packet loss, duplication and reordering probabilities (0 turns one off). */
    public void rates(double loss, double duplicate, double reorder) {
        lossRate = loss;
        duplicateRate = duplicate;
        reorderRate = reorder;
    }

    /** The per-packet loss probability now. */
    public double lossRate() {
        return lossRate;
    }

    /** Sets the delay added to every batch and the random extra up to {@code jitterNs}. */
    public void delay(long ns, long jitterNs) {
        delayNs = ns;
        delayJitterNs = jitterNs;
    }

    public boolean isCut(String peer) {
        return cut.contains(peer);
    }

    void cut(String peer) {
        cut.add(peer);
    }

    void heal(String peer) {
        cut.remove(peer);
    }

    boolean shapes() {
        return lossRate > 0 || duplicateRate > 0 || reorderRate > 0;
    }

    boolean delays() {
        return delayNs > 0 || delayJitterNs > 0;
    }

    long nextDelayNs() {
        long jitter = delayJitterNs;
        synchronized (random) {
            return delayNs + (jitter > 0 ? random.nextLong(jitter + 1) : 0);
        }
    }

    /**
     * Applies loss, duplication and reordering to a batch. A packet held back for reordering goes out
     * after the packets of the next batch (or with {@link #releaseHeld}); held packets are copied,
     * since the packet slots and the staged payloads they view are reused once the batch is sent. The
     * batch returned views the same payloads as {@code batch}.
     */
    PacketBatch shape(String peer, PacketBatch batch) {
        PacketBatch out = new PacketBatch();
        List<Packet> late = releaseHeld(peer);
        synchronized (random) {
            for (int i = 0; i < batch.size(); i++) {
                Packet packet = batch.get(i);
                if (random.nextDouble() < lossRate) {
                    dropped.incrementAndGet();
                    continue;
                }
                if (random.nextDouble() < reorderRate) {
                    reordered.incrementAndGet();
                    heldBack.computeIfAbsent(peer, p -> new ArrayList<>()).add(packet.copy());
                    continue;
                }
                out.addView(packet);
                if (random.nextDouble() < duplicateRate) {
                    duplicated.incrementAndGet();
                    out.addView(packet);
                }
            }
        }
        for (Packet packet : late) {
            out.addView(packet);
        }
        return out;
    }

    boolean hasHeld(String peer) {
        synchronized (random) {
            List<Packet> held = heldBack.get(peer);
            return held != null && !held.isEmpty();
        }
    }

    /** Held-back packets for a peer, to be sent now (none if a later batch already took them). */
    List<Packet> releaseHeld(String peer) {
        synchronized (random) {
            List<Packet> held = heldBack.get(peer);
            if (held == null || held.isEmpty()) {
                return List.of();
            }
            List<Packet> taken = new ArrayList<>(held);
            held.clear();
            return taken;
        }
    }

    void countDelayed() {
        delayed.incrementAndGet();
    }

    public long dropped() {
        return dropped.get();
    }

    public long duplicated() {
        return duplicated.get();
    }

    public long reordered() {
        return reordered.get();
    }

    public long delayedBatches() {
        return delayed.get();
    }
}
