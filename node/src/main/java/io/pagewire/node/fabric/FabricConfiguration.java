package io.pagewire.node.fabric;

import io.pagewire.config.Setting;
import java.util.List;
import java.util.Set;

/**
 * Every knob of the fabric, each declared once: name, type with unit, default, check and doc. The
 * fault-injection knobs (loss, duplication, reordering, delay, cut links) are off by default.
 * {@link FabricContext} holds their values and checks how they fit together.
 */
public final class FabricConfiguration {
    public static final Setting<Integer> LANES_PER_PEER = Setting.count("pagewire.fabric.lanesPerPeer", 2,
            "Lanes (bidirectional gRPC streams) each node opens to each peer").between(1, 64);
    public static final Setting<Long> RECONNECT_MIN = Setting.nanos("pagewire.fabric.reconnectBackoffMinNs", 20_000_000L,
            "First wait before a broken lane is dialled again; it doubles up to the maximum").where(v -> v >= 1_000_000, "at least 1 ms");
    public static final Setting<Long> RECONNECT_MAX = Setting.nanos("pagewire.fabric.reconnectBackoffMaxNs", 2_000_000_000L,
            "Longest wait before a broken lane is dialled again");
    public static final Setting<Integer> FLOW_CONTROL_WINDOW = Setting.intBytes("pagewire.fabric.flowControlWindowBytes", 4 << 20,
            "HTTP/2 flow-control window of a lane").atLeast(65536);
    public static final Setting<Integer> ON_READY_THRESHOLD = Setting.intBytes("pagewire.fabric.onReadyThresholdBytes", 32 << 10,
            "Bytes a lane may have queued in gRPC before it stops reporting ready (gRPC's own default)").atLeast(1);
    public static final Setting<Integer> MAX_MESSAGE = Setting.intBytes("pagewire.fabric.maxMessageBytes", 64 << 20,
            "Largest stream message (a packet batch) a lane accepts").where(v -> v >= 1 << 20, "at least 1 MiB");
    public static final Setting<Double> LOSS_RATE = Setting.probability("pagewire.fabric.lossRate", 0,
            "Fault injection: probability that a packet is lost");
    public static final Setting<Double> DUPLICATE_RATE = Setting.probability("pagewire.fabric.duplicateRate", 0,
            "Fault injection: probability that a packet is sent twice");
    public static final Setting<Double> REORDER_RATE = Setting.probability("pagewire.fabric.reorderRate", 0,
            "Fault injection: probability that a packet is held back and sent after the next batch");
    public static final Setting<Long> DELAY = Setting.nanos("pagewire.fabric.delayNs", 0,
            "Fault injection: delay added to every batch").where(v -> v >= 0 && v <= 10_000_000_000L, "from 0 to 10 s");
    public static final Setting<Long> DELAY_JITTER = Setting.nanos("pagewire.fabric.delayJitterNs", 0,
            "Fault injection: up to this much more delay, chosen at random per batch").where(v -> v >= 0 && v <= 10_000_000_000L,
            "from 0 to 10 s");
    public static final Setting<Set<String>> CUT_LINKS = Setting.ids("pagewire.fabric.cutLinks",
            "Fault injection: peers whose links start cut, comma-separated");
    public static final Setting<Long> FAULT_SEED = Setting.number("pagewire.fabric.faultSeed", 1,
            "Seed of the fault injector's random choices, for runs that repeat");

    /** Every setting above, in declaration order. */
    public static final List<Setting<?>> SETTINGS = Setting.declaredIn(FabricConfiguration.class);

    private FabricConfiguration() {
    }
}
