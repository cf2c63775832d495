package io.pagewire.node.nic;

import static io.pagewire.node.nic.NicConfiguration.*;

import io.pagewire.config.SettingValues;
import io.pagewire.kernel.FaultKind;
import io.pagewire.kernel.NanoClock;

/**
 * The settings one NIC runs with: the values of {@link NicConfiguration}'s settings, fluent setters,
 * and one {@link #conclude()} that rejects a bad value with a message naming its knob.
 */
public final class NicContext {
    private final SettingValues settings = new SettingValues(NicConfiguration.SETTINGS);
    private NanoClock clock = NanoClock.SYSTEM;
    private long randomSeed = System.nanoTime();
    private boolean concluded;

    /** The values of the NIC's settings, by descriptor (the node's settings registry writes them by name). */
    public SettingValues settings() {
        return settings;
    }
    public NicContext tlbEntries(int value) {
        settings.set(TLB_ENTRIES, value);
        return this;
    }

    public int tlbEntries() {
        return settings.get(TLB_ENTRIES);
    }

    public NicContext tlbWays(int value) {
        settings.set(TLB_WAYS, value);
        return this;
    }

    public int tlbWays() {
        return settings.get(TLB_WAYS);
    }

    public NicContext tlbReplacement(TlbReplacement value) {
        settings.set(TLB_REPLACEMENT, value);
        return this;
    }

    public TlbReplacement tlbReplacement() {
        return settings.get(TLB_REPLACEMENT);
    }

    public NicContext tlbIndexing(TlbIndexing value) {
        settings.set(TLB_INDEXING, value);
        return this;
    }

    public TlbIndexing tlbIndexing() {
        return settings.get(TLB_INDEXING);
    }

    public NicContext mtuBytes(int value) {
        settings.set(MTU, value);
        return this;
    }

    public int mtuBytes() {
        return settings.get(MTU);
    }

    public NicContext sendWindowPackets(int value) {
        settings.set(SEND_WINDOW, value);
        return this;
    }

    public int sendWindowPackets() {
        return settings.get(SEND_WINDOW);
    }

    public NicContext batchPackets(int value) {
        settings.set(BATCH, value);
        return this;
    }

    public int batchPackets() {
        return settings.get(BATCH);
    }

    public NicContext readRequestPackets(int value) {
        settings.set(READ_REQUEST_PACKETS, value);
        return this;
    }

    public int readRequestPackets() {
        return settings.get(READ_REQUEST_PACKETS);
    }

    public NicContext ackTimeoutNs(long value) {
        settings.set(ACK_TIMEOUT, value);
        return this;
    }

    public long ackTimeoutNs() {
        return settings.get(ACK_TIMEOUT);
    }

    public NicContext minAckTimeoutNs(long value) {
        settings.set(MIN_ACK_TIMEOUT, value);
        return this;
    }

    public long minAckTimeoutNs() {
        return settings.get(MIN_ACK_TIMEOUT);
    }

    public NicContext retryCount(int value) {
        settings.set(RETRY_COUNT, value);
        return this;
    }

    public int retryCount() {
        return settings.get(RETRY_COUNT);
    }

    public NicContext rnrDelayNs(long value) {
        settings.set(RNR_DELAY, value);
        return this;
    }

    public long rnrDelayNs() {
        return settings.get(RNR_DELAY);
    }

    public NicContext rnrRetryCount(int value) {
        settings.set(RNR_RETRY_COUNT, value);
        return this;
    }

    public int rnrRetryCount() {
        return settings.get(RNR_RETRY_COUNT);
    }

    public NicContext reorderWindowPackets(int value) {
        settings.set(REORDER_WINDOW, value);
        return this;
    }

    public int reorderWindowPackets() {
        return settings.get(REORDER_WINDOW);
    }

    public NicContext creditsPerQp(int value) {
        settings.set(CREDITS_PER_QP, value);
        return this;
    }

    public int creditsPerQp() {
        return settings.get(CREDITS_PER_QP);
    }

    public NicContext cqCapacity(int value) {
        settings.set(CQ_CAPACITY, value);
        return this;
    }

    public int cqCapacity() {
        return settings.get(CQ_CAPACITY);
    }

    public NicContext maxMessageBytes(int value) {
        settings.set(MAX_MESSAGE, value);
        return this;
    }

    public int maxMessageBytes() {
        return settings.get(MAX_MESSAGE);
    }

    /** Queue pairs one endpoint (an application's session) may hold at once. */
    public NicContext queuePairsPerSession(int value) {
        settings.set(QUEUE_PAIRS_PER_SESSION, value);
        return this;
    }

    public int queuePairsPerSession() {
        return settings.get(QUEUE_PAIRS_PER_SESSION);
    }

    /** Work requests one endpoint may have outstanding at once, posted receives included. */
    public NicContext workRequestsPerSession(int value) {
        settings.set(WORK_REQUESTS_PER_SESSION, value);
        return this;
    }

    public int workRequestsPerSession() {
        return settings.get(WORK_REQUESTS_PER_SESSION);
    }

    /** Work requests all endpoints of the node may have outstanding at once. */
    public NicContext workRequestsPerNode(int value) {
        settings.set(WORK_REQUESTS_PER_NODE, value);
        return this;
    }

    public int workRequestsPerNode() {
        return settings.get(WORK_REQUESTS_PER_NODE);
    }

    /** Memory regions one endpoint may hold at once. */
    public NicContext regionsPerSession(int value) {
        settings.set(REGIONS_PER_SESSION, value);
        return this;
    }

    public int regionsPerSession() {
        return settings.get(REGIONS_PER_SESSION);
    }

    /** Bytes one endpoint may have registered at once. */
    public NicContext registeredBytesPerSession(long value) {
        settings.set(REGISTERED_BYTES_PER_SESSION, value);
        return this;
    }

    public long registeredBytesPerSession() {
        return settings.get(REGISTERED_BYTES_PER_SESSION);
    }

    /** Event counters one endpoint may hold at once. */
    public NicContext countersPerSession(int value) {
        settings.set(COUNTERS_PER_SESSION, value);
        return this;
    }

    public int countersPerSession() {
        return settings.get(COUNTERS_PER_SESSION);
    }

    /** Bytes per second one endpoint's queue pairs may send together; 0 paces nothing. */
    public NicContext sendBytesPerSecondPerSession(long value) {
        settings.set(SEND_BYTES_PER_SECOND_PER_SESSION, value);
        return this;
    }

    public long sendBytesPerSecondPerSession() {
        return settings.get(SEND_BYTES_PER_SECOND_PER_SESSION);
    }

    /** What a paced endpoint may send back to back before its rate applies. */
    public NicContext sendBurstBytesPerSession(long value) {
        settings.set(SEND_BURST_BYTES_PER_SESSION, value);
        return this;
    }

    public long sendBurstBytesPerSession() {
        return settings.get(SEND_BURST_BYTES_PER_SESSION);
    }

    public NicContext clock(NanoClock value) {
        clock = value;
        return this;
    }

    public NanoClock clock() {
        return clock;
    }

    /** Seeds the NIC's random choices (RANDOM TLB replacement); rkeys always come from a secure source. */
    public NicContext contextCacheEntries(int value) {
        settings.set(CONTEXT_CACHE_ENTRIES, value);
        return this;
    }

    public int contextCacheEntries() {
        return settings.get(CONTEXT_CACHE_ENTRIES);
    }

    public NicContext contextCacheWays(int value) {
        settings.set(CONTEXT_CACHE_WAYS, value);
        return this;
    }

    public int contextCacheWays() {
        return settings.get(CONTEXT_CACHE_WAYS);
    }

    public NicContext contextCacheMissNs(long value) {
        settings.set(CONTEXT_CACHE_MISS, value);
        return this;
    }

    public long contextCacheMissNs() {
        return settings.get(CONTEXT_CACHE_MISS);
    }

    public NicContext reclaimAfterAccess(double value) {
        settings.set(RECLAIM_AFTER_ACCESS, value);
        return this;
    }

    public double reclaimAfterAccess() {
        return settings.get(RECLAIM_AFTER_ACCESS);
    }

    public NicContext reclaimDepth(FaultKind value) {
        settings.set(RECLAIM_DEPTH, value);
        return this;
    }

    public FaultKind reclaimDepth() {
        return settings.get(RECLAIM_DEPTH);
    }

    public NicContext faultAnswer(FaultAnswer value) {
        settings.set(FAULT_ANSWER, value);
        return this;
    }

    public FaultAnswer faultAnswer() {
        return settings.get(FAULT_ANSWER);
    }

    public NicContext randomSeed(long value) {
        settings.set(RANDOM_SEED, value);
        return this;
    }

    /** The seed of the NIC's random choices: the one set, else one drawn when the context was made. */
    public long randomSeed() {
        Long seed = settings.get(RANDOM_SEED);
        return seed == null ? randomSeed : seed;
    }

    /**
     * Validates every knob; idempotent.
     *
     * @throws IllegalArgumentException naming the first knob whose value is unusable
     */
    public NicContext conclude() {
        if (concluded) {
            return this;
        }
        settings.check();
        require(tlbWays() <= tlbEntries() && tlbEntries() % tlbWays() == 0, TLB_WAYS.name(),
                "from 1 to the TLB entries (" + tlbEntries() + ") and divide them", tlbWays());
        require(ContextCache.shapeFits(contextCacheEntries(), contextCacheWays()), CONTEXT_CACHE_WAYS.name(),
                "from 1 to the context cache's entries (" + contextCacheEntries() + ") and divide them", contextCacheWays());
        require(readRequestPackets() <= sendWindowPackets(), READ_REQUEST_PACKETS.name(),
                "from 1 to the send window (" + sendWindowPackets() + ")", readRequestPackets());
        require(clock != null, "clock", "set", null);
        concluded = true;
        return this;
    }

    private static void require(boolean ok, String knob, String expected, Object actual) {
        if (!ok) {
            throw new IllegalArgumentException(knob + " must be " + expected + ", was " + actual);
        }
    }
}
