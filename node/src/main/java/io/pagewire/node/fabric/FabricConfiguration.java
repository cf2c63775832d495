package io.pagewire.node.fabric;

/**
 * Every knob of the fabric: a property name and its default, side by side. {@link FabricContext}
 * starts from these defaults (overridden by system properties of the same name) and validates.
 * The fault-injection knobs are off by default.
 */
public final class FabricConfiguration {
    /** Lanes (bidirectional streams) each node opens to each peer. */
    public static final String LANES_PER_PEER_PROP_NAME = "pagewire.fabric.lanesPerPeer";
    public static final int LANES_PER_PEER_DEFAULT = 2;

    /** First wait before a broken lane is dialled again; it doubles up to the maximum. */
    public static final String RECONNECT_MIN_PROP_NAME = "pagewire.fabric.reconnectBackoffMinNs";
    public static final long RECONNECT_MIN_DEFAULT_NS = 20_000_000L;

    public static final String RECONNECT_MAX_PROP_NAME = "pagewire.fabric.reconnectBackoffMaxNs";
    public static final long RECONNECT_MAX_DEFAULT_NS = 2_000_000_000L;

    /** HTTP/2 flow-control window of a lane. */
    public static final String FLOW_CONTROL_WINDOW_PROP_NAME = "pagewire.fabric.flowControlWindowBytes";
    public static final int FLOW_CONTROL_WINDOW_DEFAULT = 4 << 20;

    /**
     * Bytes a lane may have queued in gRPC before it stops reporting ready. gRPC's own default (32 KiB)
     * is smaller than one batch of MTU-sized packets, so a batch waits for the one before to drain;
     * raising it lets batches queue behind each other. Measured on 2 cores it gained nothing (4 KiB
     * writes 0.35x the link at 32 KiB, 0.33x at 1 MiB) and made SHADOW senders wait for credits three
     * times as often under memory pressure, so the default stays gRPC's.
     */
    public static final String ON_READY_THRESHOLD_PROP_NAME = "pagewire.fabric.onReadyThresholdBytes";
    public static final int ON_READY_THRESHOLD_DEFAULT = 32 * 1024;

    /** Largest stream message (a packet batch) a lane accepts. */
    public static final String MAX_MESSAGE_PROP_NAME = "pagewire.fabric.maxMessageBytes";
    public static final int MAX_MESSAGE_DEFAULT = 64 << 20;

    /** Fault injection: probability that a packet is lost. */
    public static final String LOSS_RATE_PROP_NAME = "pagewire.fabric.lossRate";
    public static final double LOSS_RATE_DEFAULT = 0;

    /** Fault injection: probability that a packet is sent twice. */
    public static final String DUPLICATE_RATE_PROP_NAME = "pagewire.fabric.duplicateRate";
    public static final double DUPLICATE_RATE_DEFAULT = 0;

    /** Fault injection: probability that a packet is held back and sent after the next batch. */
    public static final String REORDER_RATE_PROP_NAME = "pagewire.fabric.reorderRate";
    public static final double REORDER_RATE_DEFAULT = 0;

    /** Fault injection: delay added to every batch. */
    public static final String DELAY_PROP_NAME = "pagewire.fabric.delayNs";
    public static final long DELAY_DEFAULT_NS = 0;

    /** Fault injection: up to this much more delay, chosen at random per batch. */
    public static final String DELAY_JITTER_PROP_NAME = "pagewire.fabric.delayJitterNs";
    public static final long DELAY_JITTER_DEFAULT_NS = 0;

    /** Fault injection: peers whose links start cut, comma-separated. */
    public static final String CUT_LINKS_PROP_NAME = "pagewire.fabric.cutLinks";
    public static final String CUT_LINKS_DEFAULT = "";

    /** Seed of the fault injector's random choices, for reproducible runs. */
    public static final String FAULT_SEED_PROP_NAME = "pagewire.fabric.faultSeed";
    public static final long FAULT_SEED_DEFAULT = 1;

    private FabricConfiguration() {
    }

    static double doubleProperty(String name, double defaultValue) {
        String value = System.getProperty(name);
        return value == null ? defaultValue : Double.parseDouble(value);
    }
}
