package io.pagewire.node.nic;

/**
 * Every knob of the emulated NIC: a property name and its default, side by side. {@link NicContext}
 * starts from these defaults (overridden by system properties of the same name) and validates.
 */
public final class NicConfiguration {
    /** Entries in the NIC's TLB (PIN_ON_MISS and ON_DEMAND translations). */
    public static final String TLB_ENTRIES_PROP_NAME = "pagewire.nic.tlbEntries";
    public static final int TLB_ENTRIES_DEFAULT = 1024;

    /** Ways per TLB set: 1 is direct-mapped, equal to the entries is fully associative. */
    public static final String TLB_WAYS_PROP_NAME = "pagewire.nic.tlbWays";
    public static final int TLB_WAYS_DEFAULT = 8;

    /** Which entry of a full TLB set a miss replaces: LRU, FIFO or RANDOM. */
    public static final String TLB_REPLACEMENT_PROP_NAME = "pagewire.nic.tlbReplacement";
    public static final TlbReplacement TLB_REPLACEMENT_DEFAULT = TlbReplacement.LRU;

    /** Which set a page's TLB entry goes to: HASHED (the default) or LOW_BITS of the virtual page number, as hardware indexes. */
    public static final String TLB_INDEXING_PROP_NAME = "pagewire.nic.tlbIndexing";
    public static final TlbIndexing TLB_INDEXING_DEFAULT = TlbIndexing.HASHED;

    /** Seed of the NIC's random choices (RANDOM TLB replacement), for runs that repeat; unset: a new seed each start. */
    public static final String RANDOM_SEED_PROP_NAME = "pagewire.nic.randomSeed";

    /** Largest payload of one packet; writes and reads longer than this are segmented. */
    public static final String MTU_PROP_NAME = "pagewire.nic.mtuBytes";
    public static final int MTU_DEFAULT = 4096;

    /** Packet sequence numbers a queue pair may have outstanding (sent, not acknowledged). */
    public static final String SEND_WINDOW_PROP_NAME = "pagewire.nic.sendWindowPackets";
    public static final int SEND_WINDOW_DEFAULT = 256;

    /** Packets a queue pair puts in one stream message. */
    public static final String BATCH_PROP_NAME = "pagewire.nic.batchPackets";
    public static final int BATCH_DEFAULT = 32;

    /** Packets a READ request asks for at most; longer reads are split into several requests. */
    public static final String READ_REQUEST_PACKETS_PROP_NAME = "pagewire.nic.readRequestPackets";
    public static final int READ_REQUEST_PACKETS_DEFAULT = 64;

    /** Time without acknowledgement progress after which outstanding packets are sent again. */
    public static final String ACK_TIMEOUT_PROP_NAME = "pagewire.nic.ackTimeoutNs";
    public static final long ACK_TIMEOUT_DEFAULT_NS = 200_000_000L;

    /** Retransmissions after timeouts before a request fails with RETRY_EXCEEDED. */
    public static final String RETRY_COUNT_PROP_NAME = "pagewire.nic.retryCount";
    public static final int RETRY_COUNT_DEFAULT = 7;

    /** How long a requester waits after an RNR NAK before it resends (sent by the responder). */
    public static final String RNR_DELAY_PROP_NAME = "pagewire.nic.rnrDelayNs";
    public static final long RNR_DELAY_DEFAULT_NS = 100_000L;

    /** RNR NAKs on one packet before its request fails with RNR_RETRY_EXCEEDED; 7 means retry forever, as in InfiniBand. */
    public static final String RNR_RETRY_COUNT_PROP_NAME = "pagewire.nic.rnrRetryCount";
    public static final int RNR_RETRY_COUNT_DEFAULT = 7;

    /** Out-of-order packets a responder holds while it waits for a missing one. */
    public static final String REORDER_WINDOW_PROP_NAME = "pagewire.nic.reorderWindowPackets";
    public static final int REORDER_WINDOW_DEFAULT = 128;

    /** Receive credits (page-sized parts) one queue pair is granted from the system buffer. */
    public static final String CREDITS_PER_QP_PROP_NAME = "pagewire.nic.creditsPerQp";
    public static final int CREDITS_PER_QP_DEFAULT = 32;

    /** Queue pairs one session (endpoint) may hold at once. */
    public static final String QUEUE_PAIRS_PER_SESSION_PROP_NAME = "pagewire.quota.queuePairsPerSession";
    public static final int QUEUE_PAIRS_PER_SESSION_DEFAULT = 256;
    /** Work requests (sends, writes, reads, atomics and posted receives) one session may have outstanding at once. */
    public static final String WORK_REQUESTS_PER_SESSION_PROP_NAME = "pagewire.quota.workRequestsPerSession";
    public static final int WORK_REQUESTS_PER_SESSION_DEFAULT = 262_144;
    /** Work requests all sessions of a node may have outstanding at once. */
    public static final String WORK_REQUESTS_PER_NODE_PROP_NAME = "pagewire.quota.workRequestsPerNode";
    public static final int WORK_REQUESTS_PER_NODE_DEFAULT = 1 << 20;
    /** Memory regions one session may hold at once. */
    public static final String REGIONS_PER_SESSION_PROP_NAME = "pagewire.quota.regionsPerSession";
    public static final int REGIONS_PER_SESSION_DEFAULT = 4096;
    /** Bytes one session may have registered at once (the implicit ODP region counts as none). */
    public static final String REGISTERED_BYTES_PER_SESSION_PROP_NAME = "pagewire.quota.registeredBytesPerSession";
    public static final long REGISTERED_BYTES_PER_SESSION_DEFAULT = 1L << 40;
    /** Event counters one session may hold at once. */
    public static final String COUNTERS_PER_SESSION_PROP_NAME = "pagewire.quota.countersPerSession";
    public static final int COUNTERS_PER_SESSION_DEFAULT = 4096;
    /**
     * Bytes per second one session's queue pairs may send together (payload, requested READ bytes and
     * 64 bytes of headers per packet); 0, the default, paces nothing, as a NIC without a rate limit.
     */
    public static final String SEND_BYTES_PER_SECOND_PER_SESSION_PROP_NAME = "pagewire.quota.sendBytesPerSecondPerSession";
    public static final long SEND_BYTES_PER_SECOND_PER_SESSION_DEFAULT = 0;
    /** What a paced session may send back to back after a pause, before its rate applies. */
    public static final String SEND_BURST_BYTES_PER_SESSION_PROP_NAME = "pagewire.quota.sendBurstBytesPerSession";
    public static final long SEND_BURST_BYTES_PER_SESSION_DEFAULT = 256L << 10;
    /** Completions a completion queue holds before the queue pairs feeding it fail. */
    public static final String CQ_CAPACITY_PROP_NAME = "pagewire.nic.cqCapacity";
    public static final int CQ_CAPACITY_DEFAULT = 65536;

    /** Largest message one work request may move. */
    public static final String MAX_MESSAGE_PROP_NAME = "pagewire.nic.maxMessageBytes";
    public static final int MAX_MESSAGE_DEFAULT = 1 << 30;

    private NicConfiguration() {
    }

    static int intProperty(String name, int defaultValue) {
        return Integer.getInteger(name, defaultValue);
    }

    static long longProperty(String name, long defaultValue) {
        return Long.getLong(name, defaultValue);
    }

    static TlbIndexing tlbIndexing() {
        String value = System.getProperty(TLB_INDEXING_PROP_NAME);
        return value == null ? TLB_INDEXING_DEFAULT : TlbIndexing.parse(TLB_INDEXING_PROP_NAME, value);
    }

    static TlbReplacement tlbReplacement() {
        String value = System.getProperty(TLB_REPLACEMENT_PROP_NAME);
        return value == null ? TLB_REPLACEMENT_DEFAULT : TlbReplacement.parse(TLB_REPLACEMENT_PROP_NAME, value);
    }
}
