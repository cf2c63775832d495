package io.pagewire.node.nic;

import io.pagewire.config.Setting;
import io.pagewire.config.SettingType;
import io.pagewire.kernel.FaultKind;
import java.util.List;

/**
 * Every knob of the emulated NIC and of the quotas it enforces, each declared once: name, type with
 * unit, default, check and doc. {@link NicContext} holds their values (a JVM system property of a
 * knob's name overrides its default) and checks how they fit together.
 */
public final class NicConfiguration {
    public static final Setting<Integer> TLB_ENTRIES = Setting.count("pagewire.nic.tlbEntries", 1024,
            "Entries in the NIC's TLB (PIN_ON_MISS and ON_DEMAND translations)").between(1, 1 << 20);
    public static final Setting<Integer> TLB_WAYS = Setting.count("pagewire.nic.tlbWays", 8,
            "Ways per TLB set: 1 is direct-mapped, the number of entries is fully associative").atLeast(1);
    public static final Setting<TlbReplacement> TLB_REPLACEMENT = Setting.choice("pagewire.nic.tlbReplacement", TlbReplacement.class,
            TlbReplacement.LRU, "Which entry of a full TLB set a miss replaces").where(v -> v != null, "set");
    public static final Setting<TlbIndexing> TLB_INDEXING = Setting.choice("pagewire.nic.tlbIndexing", TlbIndexing.class,
            TlbIndexing.HASHED, "Which set a page's TLB entry goes to: a hash, or the virtual page number's low bits as hardware indexes")
            .where(v -> v != null, "set");
    public static final Setting<Long> RANDOM_SEED = Setting.of("pagewire.nic.randomSeed", SettingType.NUMBER, null,
            "Seed of the NIC's random choices (RANDOM TLB replacement), for runs that repeat; unset for a new seed each start");
    public static final Setting<Integer> CONTEXT_CACHE_ENTRIES = Setting.count("pagewire.nic.contextCacheEntries", 0,
            "Queue pair and region contexts the NIC's on-chip cache holds; a context not in it is fetched from host memory (0: every"
                    + " context is on the chip, nothing modelled)").between(0, 1 << 20);
    public static final Setting<Integer> CONTEXT_CACHE_WAYS = Setting.count("pagewire.nic.contextCacheWays", 8,
            "Associativity of the NIC's context cache").between(1, 64);
    public static final Setting<Long> CONTEXT_CACHE_MISS = Setting.nanos("pagewire.nic.contextCacheMissNs", 1_000,
            "NIC time a context cache miss costs: the fetch of the context from host memory over PCIe")
            .where(v -> v >= 0 && v <= 1_000_000, "0 to 1 ms");
    public static final Setting<Double> RECLAIM_AFTER_ACCESS = Setting.of("pagewire.nic.reclaimAfterAccess", SettingType.PROBABILITY, 0.0,
            "Memory pressure for fault experiments: probability that the kernel takes a page away from the NIC just after a peer's"
                    + " request touched it, so that the next request to touch it faults (0: never; 1: after every touch)")
            .where(p -> p >= 0 && p <= 1, "a probability from 0 to 1");
    public static final Setting<FaultKind> RECLAIM_DEPTH = Setting.choice("pagewire.nic.reclaimDepth", FaultKind.class, FaultKind.MINOR,
            "What pagewire.nic.reclaimAfterAccess takes: MINOR, the NIC's translation (TLB entry and its pin, the on-demand mapping) while"
                    + " the page stays in memory; MAJOR, the page itself, to swap").where(v -> v != null, "set");
    public static final Setting<FaultAnswer> FAULT_ANSWER = Setting.choice("pagewire.nic.faultAnswer", FaultAnswer.class, FaultAnswer.RNR_NAK,
            "What a responder answers a request that meets a NIC page fault: RNR_NAK (the requester retries after the RNR delay) or DROP"
                    + " (nothing; the requester's acknowledgement timeout brings the request back)").where(v -> v != null, "set");
    public static final Setting<Integer> MTU = Setting.intBytes("pagewire.nic.mtuBytes", 4096,
            "Largest payload of one packet; longer messages are segmented").between(64, 1 << 20);
    public static final Setting<Integer> SEND_WINDOW = Setting.count("pagewire.nic.sendWindowPackets", 256,
            "Packet sequence numbers a queue pair may have sent and not yet acknowledged").between(1, 1 << 16);
    public static final Setting<Integer> BATCH = Setting.count("pagewire.nic.batchPackets", 32,
            "Packets a queue pair puts in one stream message").between(1, 1024);
    public static final Setting<Integer> READ_REQUEST_PACKETS = Setting.count("pagewire.nic.readRequestPackets", 64,
            "Responses one READ request asks for at most; longer READs are split into several requests").atLeast(1);
    public static final Setting<Long> ACK_TIMEOUT = Setting.nanos("pagewire.nic.ackTimeoutNs", 200_000_000L,
            "Time without acknowledgement progress after which outstanding packets are sent again (backing off to 4 times it)")
            .where(v -> v >= 1_000_000, "at least 1 ms");
    public static final Setting<Long> MIN_ACK_TIMEOUT = Setting.nanos("pagewire.nic.minAckTimeoutNs", 50_000_000L,
            "Shortest acknowledgement timeout a queue pair may ask for (ibv_modify_qp's timeout): a lane on a loaded host can be silent this long")
            .where(v -> v >= 1_000_000, "at least 1 ms");
    public static final Setting<Integer> RETRY_COUNT = Setting.count("pagewire.nic.retryCount", 7,
            "Retransmissions after timeouts before a request fails with RETRY_EXCEEDED").between(0, 1000);
    public static final Setting<Long> RNR_DELAY = Setting.nanos("pagewire.nic.rnrDelayNs", 100_000L,
            "How long a requester waits after an RNR NAK before it sends again (the responder says it)")
            .where(v -> v >= 1_000 && v <= 10_000_000_000L, "from 1 us to 10 s");
    public static final Setting<Integer> RNR_RETRY_COUNT = Setting.count("pagewire.nic.rnrRetryCount", 7,
            "RNR NAKs on one packet before its request fails with RNR_RETRY_EXCEEDED; 7 retries forever, as in InfiniBand")
            .where(v -> v >= 0 && v <= 7, "from 0 to 7 (7: forever)");
    public static final Setting<Integer> REORDER_WINDOW = Setting.count("pagewire.nic.reorderWindowPackets", 128,
            "Out-of-order packets a responder holds while it waits for a missing one").between(1, 1 << 16);
    public static final Setting<Integer> CREDITS_PER_QP = Setting.count("pagewire.nic.creditsPerQp", 32,
            "Receive credits (page-sized parts of the system buffer) one queue pair may hold at most").atLeast(1);
    public static final Setting<Integer> CQ_CAPACITY = Setting.count("pagewire.nic.cqCapacity", 65536,
            "Completions a completion queue holds, and requests a send or receive queue holds").atLeast(16);
    public static final Setting<Integer> MAX_MESSAGE = Setting.intBytes("pagewire.nic.maxMessageBytes", 1 << 30,
            "Largest message one work request may move").atLeast(1);

    public static final Setting<Integer> QUEUE_PAIRS_PER_SESSION = Setting.count("pagewire.quota.queuePairsPerSession", 256,
            "Queue pairs one session (endpoint) may hold at once").atLeast(1);
    public static final Setting<Integer> WORK_REQUESTS_PER_SESSION = Setting.count("pagewire.quota.workRequestsPerSession", 262_144,
            "Work requests (sends, writes, reads, atomics, posted receives) one session may have outstanding at once").atLeast(1);
    public static final Setting<Integer> WORK_REQUESTS_PER_NODE = Setting.count("pagewire.quota.workRequestsPerNode", 1 << 20,
            "Work requests all sessions of the node may have outstanding at once").atLeast(1);
    public static final Setting<Integer> REGIONS_PER_SESSION = Setting.count("pagewire.quota.regionsPerSession", 4096,
            "Memory regions one session may hold at once").atLeast(1);
    public static final Setting<Long> REGISTERED_BYTES_PER_SESSION = Setting.bytes("pagewire.quota.registeredBytesPerSession", 1L << 40,
            "Bytes one session may have registered at once (the implicit ODP region counts as none)").atLeast(1);
    public static final Setting<Integer> COUNTERS_PER_SESSION = Setting.count("pagewire.quota.countersPerSession", 4096,
            "Event counters one session may hold at once").atLeast(1);
    public static final Setting<Long> SEND_BYTES_PER_SECOND_PER_SESSION = Setting.bytes("pagewire.quota.sendBytesPerSecondPerSession", 0,
            "Bytes per second one session's queue pairs may send together (payload, READ bytes asked for, 64 bytes per packet); 0 paces nothing")
            .where(v -> v >= 0, "0 (no pacing) or a positive rate");
    public static final Setting<Long> SEND_BURST_BYTES_PER_SESSION = Setting.bytes("pagewire.quota.sendBurstBytesPerSession", 256L << 10,
            "What a paced session may send back to back after a pause, before its rate applies").where(v -> v >= 1, "positive");

    /** Every setting above, in declaration order. */
    public static final List<Setting<?>> SETTINGS = Setting.declaredIn(NicConfiguration.class);

    private NicConfiguration() {
    }
}
