package io.pagewire.node.fabric;

import static io.pagewire.node.fabric.FabricConfiguration.*;

import io.pagewire.config.SettingValues;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The settings one node's fabric runs with: the values of {@link FabricConfiguration}'s settings,
 * fluent setters, and one {@link #conclude()} that rejects a bad value with a message naming its knob.
 * It also holds the ids this node accepts lanes from, which grow as peers are dialled.
 */
public final class FabricContext {
    private final SettingValues settings = new SettingValues(FabricConfiguration.SETTINGS);
    private String nodeId;
    private final Set<String> acceptedPeers = ConcurrentHashMap.newKeySet();
    private boolean peerCertificatesRequired;
    private boolean concluded;

    /** The values of the fabric's settings, by descriptor (the node's settings registry writes them by name). */
    public SettingValues settings() {
        return settings;
    }

    public FabricContext nodeId(String value) {
        nodeId = value;
        return this;
    }

    public String nodeId() {
        return nodeId;
    }

    public FabricContext lanesPerPeer(int value) {
        settings.set(LANES_PER_PEER, value);
        return this;
    }

    public int lanesPerPeer() {
        return settings.get(LANES_PER_PEER);
    }

    public FabricContext reconnectBackoffMinNs(long value) {
        settings.set(RECONNECT_MIN, value);
        return this;
    }

    public long reconnectBackoffMinNs() {
        return settings.get(RECONNECT_MIN);
    }

    public FabricContext reconnectBackoffMaxNs(long value) {
        settings.set(RECONNECT_MAX, value);
        return this;
    }

    public long reconnectBackoffMaxNs() {
        return settings.get(RECONNECT_MAX);
    }

    public FabricContext onReadyThresholdBytes(int value) {
        settings.set(ON_READY_THRESHOLD, value);
        return this;
    }

    public int onReadyThresholdBytes() {
        return settings.get(ON_READY_THRESHOLD);
    }

    public FabricContext flowControlWindowBytes(int value) {
        settings.set(FLOW_CONTROL_WINDOW, value);
        return this;
    }

    public int flowControlWindowBytes() {
        return settings.get(FLOW_CONTROL_WINDOW);
    }

    public FabricContext maxMessageBytes(int value) {
        settings.set(MAX_MESSAGE, value);
        return this;
    }

    public int maxMessageBytes() {
        return settings.get(MAX_MESSAGE);
    }

    public FabricContext lossRate(double value) {
        settings.set(LOSS_RATE, value);
        return this;
    }

    public double lossRate() {
        return settings.get(LOSS_RATE);
    }

    public FabricContext duplicateRate(double value) {
        settings.set(DUPLICATE_RATE, value);
        return this;
    }

    public double duplicateRate() {
        return settings.get(DUPLICATE_RATE);
    }

    public FabricContext reorderRate(double value) {
        settings.set(REORDER_RATE, value);
        return this;
    }

    public double reorderRate() {
        return settings.get(REORDER_RATE);
    }

    public FabricContext delayNs(long value) {
        settings.set(DELAY, value);
        return this;
    }

    public long delayNs() {
        return settings.get(DELAY);
    }

    public FabricContext delayJitterNs(long value) {
        settings.set(DELAY_JITTER, value);
        return this;
    }

    public long delayJitterNs() {
        return settings.get(DELAY_JITTER);
    }

    public FabricContext cutLinks(Set<String> value) {
        settings.set(CUT_LINKS, new TreeSet<>(value));
        return this;
    }

    public Set<String> cutLinks() {
        return settings.get(CUT_LINKS);
    }

    public FabricContext faultSeed(long value) {
        settings.set(FAULT_SEED, value);
        return this;
    }

    public long faultSeed() {
        return settings.get(FAULT_SEED);
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

    /**
     * Validates every knob; idempotent.
     *
     * @throws IllegalArgumentException naming the first knob whose value is unusable
     */
    public FabricContext conclude() {
        if (concluded) {
            return this;
        }
        if (nodeId == null || !nodeId.matches("[A-Za-z0-9._-]{1,64}")) {
            throw new IllegalArgumentException("pagewire.node.id must be 1 to 64 letters, digits, '.', '_' or '-', was " + nodeId);
        }
        settings.check();
        if (reconnectBackoffMaxNs() < reconnectBackoffMinNs()) {
            throw new IllegalArgumentException(RECONNECT_MAX.name() + " must be at least the minimum back-off (" + reconnectBackoffMinNs()
                    + "), was " + reconnectBackoffMaxNs());
        }
        concluded = true;
        return this;
    }
}
