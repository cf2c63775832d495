package io.pagewire.node.fabric;

import java.util.Arrays;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;

/**
 * The settings one node's fabric runs with: defaults from {@link FabricConfiguration}, fluent setters,
 * and one {@link #conclude()} that rejects a bad value with a message naming its knob.
 */
public final class FabricContext {
    private String nodeId;
    private int lanesPerPeer = Integer.getInteger(FabricConfiguration.LANES_PER_PEER_PROP_NAME, FabricConfiguration.LANES_PER_PEER_DEFAULT);
    private long reconnectBackoffMinNs = Long.getLong(FabricConfiguration.RECONNECT_MIN_PROP_NAME, FabricConfiguration.RECONNECT_MIN_DEFAULT_NS);
    private long reconnectBackoffMaxNs = Long.getLong(FabricConfiguration.RECONNECT_MAX_PROP_NAME, FabricConfiguration.RECONNECT_MAX_DEFAULT_NS);
    private int flowControlWindowBytes = Integer.getInteger(FabricConfiguration.FLOW_CONTROL_WINDOW_PROP_NAME,
            FabricConfiguration.FLOW_CONTROL_WINDOW_DEFAULT);
    private int onReadyThresholdBytes = Integer.getInteger(FabricConfiguration.ON_READY_THRESHOLD_PROP_NAME,
            FabricConfiguration.ON_READY_THRESHOLD_DEFAULT);
    private int maxMessageBytes = Integer.getInteger(FabricConfiguration.MAX_MESSAGE_PROP_NAME, FabricConfiguration.MAX_MESSAGE_DEFAULT);
    private double lossRate = FabricConfiguration.doubleProperty(FabricConfiguration.LOSS_RATE_PROP_NAME, FabricConfiguration.LOSS_RATE_DEFAULT);
    private double duplicateRate = FabricConfiguration.doubleProperty(FabricConfiguration.DUPLICATE_RATE_PROP_NAME,
            FabricConfiguration.DUPLICATE_RATE_DEFAULT);
    private double reorderRate = FabricConfiguration.doubleProperty(FabricConfiguration.REORDER_RATE_PROP_NAME,
            FabricConfiguration.REORDER_RATE_DEFAULT);
    private long delayNs = Long.getLong(FabricConfiguration.DELAY_PROP_NAME, FabricConfiguration.DELAY_DEFAULT_NS);
    private long delayJitterNs = Long.getLong(FabricConfiguration.DELAY_JITTER_PROP_NAME, FabricConfiguration.DELAY_JITTER_DEFAULT_NS);
    private Set<String> cutLinks = parsePeers(System.getProperty(FabricConfiguration.CUT_LINKS_PROP_NAME, FabricConfiguration.CUT_LINKS_DEFAULT));
    private long faultSeed = Long.getLong(FabricConfiguration.FAULT_SEED_PROP_NAME, FabricConfiguration.FAULT_SEED_DEFAULT);
    private final Set<String> acceptedPeers = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private boolean peerCertificatesRequired;
    private boolean concluded;

    /** Parses a comma-separated list of node ids. */
    public static Set<String> parsePeers(String value) {
        return Arrays.stream(value.split(",")).map(String::trim).filter(s -> !s.isEmpty()).collect(Collectors.toCollection(TreeSet::new));
    }

    public FabricContext nodeId(String value) {
        nodeId = value;
        return this;
    }

    public FabricContext lanesPerPeer(int value) {
        lanesPerPeer = value;
        return this;
    }

    public FabricContext reconnectBackoffMinNs(long value) {
        reconnectBackoffMinNs = value;
        return this;
    }

    public FabricContext reconnectBackoffMaxNs(long value) {
        reconnectBackoffMaxNs = value;
        return this;
    }

    public FabricContext onReadyThresholdBytes(int value) {
        onReadyThresholdBytes = value;
        return this;
    }

    public FabricContext flowControlWindowBytes(int value) {
        flowControlWindowBytes = value;
        return this;
    }

    public FabricContext maxMessageBytes(int value) {
        maxMessageBytes = value;
        return this;
    }

    public FabricContext lossRate(double value) {
        lossRate = value;
        return this;
    }

    public FabricContext duplicateRate(double value) {
        duplicateRate = value;
        return this;
    }

    public FabricContext reorderRate(double value) {
        reorderRate = value;
        return this;
    }

    public FabricContext delayNs(long value) {
        delayNs = value;
        return this;
    }

    public FabricContext delayJitterNs(long value) {
        delayJitterNs = value;
        return this;
    }

    public FabricContext cutLinks(Set<String> value) {
        cutLinks = new TreeSet<>(value);
        return this;
    }

    public FabricContext faultSeed(long value) {
        faultSeed = value;
        return this;
    }

    /**
     * A node whose lanes this node accepts even though it does not dial it. Peers it dials are
     * accepted too; a lane from any other id is refused, so nobody can make up peers.
     */
    public FabricContext acceptPeer(String id) {
        acceptedPeers.add(id);
        return this;
    }

    /** The ids accepted so far (dialled peers join as they are dialled). */
    public Set<String> acceptedPeers() {
        return acceptedPeers;
    }

    /**
     * Whether a lane must come from a caller whose certificate names the node its hello claims to be
     * (mutual TLS); without, the hello's id is taken on trust (plaintext, local experiments).
     */
    public FabricContext peerCertificatesRequired(boolean value) {
        peerCertificatesRequired = value;
        return this;
    }

    public boolean peerCertificatesRequired() {
        return peerCertificatesRequired;
    }

    public String nodeId() {
        return nodeId;
    }

    public int lanesPerPeer() {
        return lanesPerPeer;
    }

    public long reconnectBackoffMinNs() {
        return reconnectBackoffMinNs;
    }

    public long reconnectBackoffMaxNs() {
        return reconnectBackoffMaxNs;
    }

    public int onReadyThresholdBytes() {
        return onReadyThresholdBytes;
    }

    public int flowControlWindowBytes() {
        return flowControlWindowBytes;
    }

    public int maxMessageBytes() {
        return maxMessageBytes;
    }

    public double lossRate() {
        return lossRate;
    }

    public double duplicateRate() {
        return duplicateRate;
    }

    public double reorderRate() {
        return reorderRate;
    }

    public long delayNs() {
        return delayNs;
    }

    public long delayJitterNs() {
        return delayJitterNs;
    }

    public Set<String> cutLinks() {
        return cutLinks;
    }

    public long faultSeed() {
        return faultSeed;
    }

    /**
     * Validates every knob; idempotent.
     *
     * @throws IllegalArgumentException naming the first knob whose value is unusable
     */
    public FabricContext conclude() {
        if (concluded) {
            return this;
        }
        require(nodeId != null && nodeId.matches("[A-Za-z0-9._-]{1,64}"), "pagewire.node.id",
                "1 to 64 letters, digits, '.', '_' or '-'", nodeId);
        require(lanesPerPeer >= 1 && lanesPerPeer <= 64, FabricConfiguration.LANES_PER_PEER_PROP_NAME, "from 1 to 64", lanesPerPeer);
        require(reconnectBackoffMinNs >= 1_000_000, FabricConfiguration.RECONNECT_MIN_PROP_NAME, "at least 1 ms", reconnectBackoffMinNs);
        require(reconnectBackoffMaxNs >= reconnectBackoffMinNs, FabricConfiguration.RECONNECT_MAX_PROP_NAME,
                "at least the minimum back-off (" + reconnectBackoffMinNs + ")", reconnectBackoffMaxNs);
        require(onReadyThresholdBytes >= 1, FabricConfiguration.ON_READY_THRESHOLD_PROP_NAME, "at least 1", onReadyThresholdBytes);
        require(flowControlWindowBytes >= 65536, FabricConfiguration.FLOW_CONTROL_WINDOW_PROP_NAME, "at least 65536", flowControlWindowBytes);
        require(maxMessageBytes >= 1 << 20, FabricConfiguration.MAX_MESSAGE_PROP_NAME, "at least 1 MiB", maxMessageBytes);
        requireRate(lossRate, FabricConfiguration.LOSS_RATE_PROP_NAME);
        requireRate(duplicateRate, FabricConfiguration.DUPLICATE_RATE_PROP_NAME);
        requireRate(reorderRate, FabricConfiguration.REORDER_RATE_PROP_NAME);
        require(delayNs >= 0 && delayNs <= 10_000_000_000L, FabricConfiguration.DELAY_PROP_NAME, "from 0 to 10 s", delayNs);
        require(delayJitterNs >= 0 && delayJitterNs <= 10_000_000_000L, FabricConfiguration.DELAY_JITTER_PROP_NAME, "from 0 to 10 s", delayJitterNs);
        concluded = true;
        return this;
    }

    private static void requireRate(double rate, String knob) {
        require(rate >= 0 && rate < 1, knob, "a probability from 0 to below 1", rate);
    }

    private static void require(boolean ok, String knob, String expected, Object actual) {
        if (!ok) {
            throw new IllegalArgumentException(knob + " must be " + expected + ", was " + actual);
        }
    }
}
