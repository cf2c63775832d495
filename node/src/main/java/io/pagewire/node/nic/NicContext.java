package io.pagewire.node.nic;

import static io.pagewire.node.nic.NicConfiguration.intProperty;
import static io.pagewire.node.nic.NicConfiguration.longProperty;

import io.pagewire.kernel.NanoClock;

/**
 * The settings one NIC runs with: defaults from {@link NicConfiguration}, fluent setters, and one
 * {@link #conclude()} that rejects a bad value with a message naming its knob.
 */
public final class NicContext {
    private int tlbEntries = intProperty(NicConfiguration.TLB_ENTRIES_PROP_NAME, NicConfiguration.TLB_ENTRIES_DEFAULT);
    private int tlbWays = intProperty(NicConfiguration.TLB_WAYS_PROP_NAME, NicConfiguration.TLB_WAYS_DEFAULT);
    private TlbReplacement tlbReplacement = NicConfiguration.tlbReplacement();
    private TlbIndexing tlbIndexing = NicConfiguration.tlbIndexing();
    private int mtuBytes = intProperty(NicConfiguration.MTU_PROP_NAME, NicConfiguration.MTU_DEFAULT);
    private int sendWindowPackets = intProperty(NicConfiguration.SEND_WINDOW_PROP_NAME, NicConfiguration.SEND_WINDOW_DEFAULT);
    private int batchPackets = intProperty(NicConfiguration.BATCH_PROP_NAME, NicConfiguration.BATCH_DEFAULT);
    private int readRequestPackets = intProperty(NicConfiguration.READ_REQUEST_PACKETS_PROP_NAME,
            NicConfiguration.READ_REQUEST_PACKETS_DEFAULT);
    private long ackTimeoutNs = longProperty(NicConfiguration.ACK_TIMEOUT_PROP_NAME, NicConfiguration.ACK_TIMEOUT_DEFAULT_NS);
    private int retryCount = intProperty(NicConfiguration.RETRY_COUNT_PROP_NAME, NicConfiguration.RETRY_COUNT_DEFAULT);
    private long rnrDelayNs = longProperty(NicConfiguration.RNR_DELAY_PROP_NAME, NicConfiguration.RNR_DELAY_DEFAULT_NS);
    private int rnrRetryCount = intProperty(NicConfiguration.RNR_RETRY_COUNT_PROP_NAME, NicConfiguration.RNR_RETRY_COUNT_DEFAULT);
    private int reorderWindowPackets = intProperty(NicConfiguration.REORDER_WINDOW_PROP_NAME, NicConfiguration.REORDER_WINDOW_DEFAULT);
    private int creditsPerQp = intProperty(NicConfiguration.CREDITS_PER_QP_PROP_NAME, NicConfiguration.CREDITS_PER_QP_DEFAULT);
    private int cqCapacity = intProperty(NicConfiguration.CQ_CAPACITY_PROP_NAME, NicConfiguration.CQ_CAPACITY_DEFAULT);
    private int queuePairsPerSession = intProperty(NicConfiguration.QUEUE_PAIRS_PER_SESSION_PROP_NAME,
            NicConfiguration.QUEUE_PAIRS_PER_SESSION_DEFAULT);
    private int workRequestsPerSession = intProperty(NicConfiguration.WORK_REQUESTS_PER_SESSION_PROP_NAME,
            NicConfiguration.WORK_REQUESTS_PER_SESSION_DEFAULT);
    private int workRequestsPerNode = intProperty(NicConfiguration.WORK_REQUESTS_PER_NODE_PROP_NAME, NicConfiguration.WORK_REQUESTS_PER_NODE_DEFAULT);
    private int regionsPerSession = intProperty(NicConfiguration.REGIONS_PER_SESSION_PROP_NAME, NicConfiguration.REGIONS_PER_SESSION_DEFAULT);
    private long registeredBytesPerSession = longProperty(NicConfiguration.REGISTERED_BYTES_PER_SESSION_PROP_NAME,
            NicConfiguration.REGISTERED_BYTES_PER_SESSION_DEFAULT);
    private int countersPerSession = intProperty(NicConfiguration.COUNTERS_PER_SESSION_PROP_NAME, NicConfiguration.COUNTERS_PER_SESSION_DEFAULT);
    private long sendBytesPerSecondPerSession = longProperty(NicConfiguration.SEND_BYTES_PER_SECOND_PER_SESSION_PROP_NAME,
            NicConfiguration.SEND_BYTES_PER_SECOND_PER_SESSION_DEFAULT);
    private long sendBurstBytesPerSession = longProperty(NicConfiguration.SEND_BURST_BYTES_PER_SESSION_PROP_NAME,
            NicConfiguration.SEND_BURST_BYTES_PER_SESSION_DEFAULT);
    private int maxMessageBytes = intProperty(NicConfiguration.MAX_MESSAGE_PROP_NAME, NicConfiguration.MAX_MESSAGE_DEFAULT);
    private NanoClock clock = NanoClock.SYSTEM;
    private long randomSeed = longProperty(NicConfiguration.RANDOM_SEED_PROP_NAME, System.nanoTime());
    private boolean concluded;

    public NicContext tlbEntries(int value) {
        tlbEntries = value;
        return this;
    }

    public NicContext tlbWays(int value) {
        tlbWays = value;
        return this;
    }

    public NicContext tlbReplacement(TlbReplacement value) {
        tlbReplacement = value;
        return this;
    }

    public NicContext mtuBytes(int value) {
        mtuBytes = value;
        return this;
    }

    public NicContext sendWindowPackets(int value) {
        sendWindowPackets = value;
        return this;
    }

    public NicContext batchPackets(int value) {
        batchPackets = value;
        return this;
    }

    public NicContext readRequestPackets(int value) {
        readRequestPackets = value;
        return this;
    }

    public NicContext ackTimeoutNs(long value) {
        ackTimeoutNs = value;
        return this;
    }

    public NicContext retryCount(int value) {
        retryCount = value;
        return this;
    }

    public NicContext rnrDelayNs(long value) {
        rnrDelayNs = value;
        return this;
    }

    public NicContext rnrRetryCount(int value) {
        rnrRetryCount = value;
        return this;
    }

    public NicContext reorderWindowPackets(int value) {
        reorderWindowPackets = value;
        return this;
    }

    public NicContext creditsPerQp(int value) {
        creditsPerQp = value;
        return this;
    }

    /** Queue pairs one endpoint (an application's session) may hold at once. */
    public NicContext queuePairsPerSession(int value) {
        queuePairsPerSession = value;
        return this;
    }

    /** Work requests one endpoint may have outstanding at once, posted receives included. */
    public NicContext workRequestsPerSession(int value) {
        workRequestsPerSession = value;
        return this;
    }

    /** Work requests all endpoints of the node may have outstanding at once. */
    public NicContext workRequestsPerNode(int value) {
        workRequestsPerNode = value;
        return this;
    }

    public int workRequestsPerSession() {
        return workRequestsPerSession;
    }

    public int workRequestsPerNode() {
        return workRequestsPerNode;
    }

    /** Memory regions one endpoint may hold at once. */
    public NicContext regionsPerSession(int value) {
        regionsPerSession = value;
        return this;
    }

    /** Bytes one endpoint may have registered at once. */
    public NicContext registeredBytesPerSession(long value) {
        registeredBytesPerSession = value;
        return this;
    }

    /** Event counters one endpoint may hold at once. */
    public NicContext countersPerSession(int value) {
        countersPerSession = value;
        return this;
    }

    /** Bytes per second one endpoint's queue pairs may send together; 0 paces nothing. */
    public NicContext sendBytesPerSecondPerSession(long value) {
        sendBytesPerSecondPerSession = value;
        return this;
    }

    /** What a paced endpoint may send back to back before its rate applies. */
    public NicContext sendBurstBytesPerSession(long value) {
        sendBurstBytesPerSession = value;
        return this;
    }

    public long sendBytesPerSecondPerSession() {
        return sendBytesPerSecondPerSession;
    }

    public long sendBurstBytesPerSession() {
        return sendBurstBytesPerSession;
    }

    public int queuePairsPerSession() {
        return queuePairsPerSession;
    }

    public int regionsPerSession() {
        return regionsPerSession;
    }

    public long registeredBytesPerSession() {
        return registeredBytesPerSession;
    }

    public int countersPerSession() {
        return countersPerSession;
    }

    public NicContext cqCapacity(int value) {
        cqCapacity = value;
        return this;
    }

    public NicContext maxMessageBytes(int value) {
        maxMessageBytes = value;
        return this;
    }

    public NicContext clock(NanoClock value) {
        clock = value;
        return this;
    }

    public NicContext tlbIndexing(TlbIndexing value) {
        tlbIndexing = value;
        return this;
    }

    public TlbIndexing tlbIndexing() {
        return tlbIndexing;
    }

    /** Seeds the NIC's random choices (RANDOM TLB replacement); rkeys always come from a secure source. */
    public NicContext randomSeed(long value) {
        randomSeed = value;
        return this;
    }

    public int tlbEntries() {
        return tlbEntries;
    }

    public int tlbWays() {
        return tlbWays;
    }

    public TlbReplacement tlbReplacement() {
        return tlbReplacement;
    }

    public int mtuBytes() {
        return mtuBytes;
    }

    public int sendWindowPackets() {
        return sendWindowPackets;
    }

    public int batchPackets() {
        return batchPackets;
    }

    public int readRequestPackets() {
        return readRequestPackets;
    }

    public long ackTimeoutNs() {
        return ackTimeoutNs;
    }

    public int retryCount() {
        return retryCount;
    }

    public long rnrDelayNs() {
        return rnrDelayNs;
    }

    public int rnrRetryCount() {
        return rnrRetryCount;
    }

    public int reorderWindowPackets() {
        return reorderWindowPackets;
    }

    public int creditsPerQp() {
        return creditsPerQp;
    }

    public int cqCapacity() {
        return cqCapacity;
    }

    public int maxMessageBytes() {
        return maxMessageBytes;
    }

    public NanoClock clock() {
        return clock;
    }

    public long randomSeed() {
        return randomSeed;
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
        require(tlbEntries >= 1 && tlbEntries <= (1 << 20), NicConfiguration.TLB_ENTRIES_PROP_NAME, "from 1 to 1048576", tlbEntries);
        require(tlbWays >= 1 && tlbWays <= tlbEntries && tlbEntries % tlbWays == 0, NicConfiguration.TLB_WAYS_PROP_NAME,
                "from 1 to the TLB entries (" + tlbEntries + ") and divide them", tlbWays);
        require(tlbReplacement != null, NicConfiguration.TLB_REPLACEMENT_PROP_NAME, "set", null);
        require(mtuBytes >= 64 && mtuBytes <= (1 << 20), NicConfiguration.MTU_PROP_NAME, "from 64 to 1048576", mtuBytes);
        require(sendWindowPackets >= 1 && sendWindowPackets <= (1 << 16), NicConfiguration.SEND_WINDOW_PROP_NAME, "from 1 to 65536", sendWindowPackets);
        require(batchPackets >= 1 && batchPackets <= 1024, NicConfiguration.BATCH_PROP_NAME, "from 1 to 1024", batchPackets);
        require(readRequestPackets >= 1 && readRequestPackets <= sendWindowPackets, NicConfiguration.READ_REQUEST_PACKETS_PROP_NAME,
                "from 1 to the send window (" + sendWindowPackets + ")", readRequestPackets);
        require(ackTimeoutNs >= 1_000_000, NicConfiguration.ACK_TIMEOUT_PROP_NAME, "at least 1 ms", ackTimeoutNs);
        require(retryCount >= 0 && retryCount <= 1000, NicConfiguration.RETRY_COUNT_PROP_NAME, "from 0 to 1000", retryCount);
        require(rnrDelayNs >= 1_000 && rnrDelayNs <= 10_000_000_000L, NicConfiguration.RNR_DELAY_PROP_NAME, "from 1 us to 10 s", rnrDelayNs);
        require(rnrRetryCount >= 0 && rnrRetryCount <= 7, NicConfiguration.RNR_RETRY_COUNT_PROP_NAME, "from 0 to 7 (7: forever)", rnrRetryCount);
        require(reorderWindowPackets >= 1 && reorderWindowPackets <= (1 << 16), NicConfiguration.REORDER_WINDOW_PROP_NAME,
                "from 1 to 65536", reorderWindowPackets);
        require(creditsPerQp >= 1, NicConfiguration.CREDITS_PER_QP_PROP_NAME, "at least 1", creditsPerQp);
        require(cqCapacity >= 16, NicConfiguration.CQ_CAPACITY_PROP_NAME, "at least 16", cqCapacity);
        require(workRequestsPerSession >= 1, NicConfiguration.WORK_REQUESTS_PER_SESSION_PROP_NAME, "at least 1", workRequestsPerSession);
        require(workRequestsPerNode >= 1, NicConfiguration.WORK_REQUESTS_PER_NODE_PROP_NAME, "at least 1", workRequestsPerNode);
        require(queuePairsPerSession >= 1, NicConfiguration.QUEUE_PAIRS_PER_SESSION_PROP_NAME, "at least 1", queuePairsPerSession);
        require(regionsPerSession >= 1, NicConfiguration.REGIONS_PER_SESSION_PROP_NAME, "at least 1", regionsPerSession);
        require(registeredBytesPerSession >= 1, NicConfiguration.REGISTERED_BYTES_PER_SESSION_PROP_NAME, "at least 1", registeredBytesPerSession);
        require(countersPerSession >= 1, NicConfiguration.COUNTERS_PER_SESSION_PROP_NAME, "at least 1", countersPerSession);
        require(sendBytesPerSecondPerSession >= 0, NicConfiguration.SEND_BYTES_PER_SECOND_PER_SESSION_PROP_NAME, "0 (no pacing) or a positive rate",
                sendBytesPerSecondPerSession);
        require(sendBurstBytesPerSession >= 1, NicConfiguration.SEND_BURST_BYTES_PER_SESSION_PROP_NAME, "positive", sendBurstBytesPerSession);
        require(maxMessageBytes >= 1, NicConfiguration.MAX_MESSAGE_PROP_NAME, "positive", maxMessageBytes);
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
