package io.pagewire.node.nic;

/** The NIC's event counters, each with a stable id and a label a person can read. */
public enum NicCounter {
    TLB_HITS(0, "translations found in the TLB (every lookup: both sides, retransmissions and prefetch included)"),
    TLB_MISSES(1, "translations not in the TLB (every lookup)"),
    TLB_EVICTIONS(2, "TLB entries replaced to make room"),
    SEND_FAULTS_MINOR(3, "send-side page faults served without I/O"),
    SEND_FAULTS_MAJOR(4, "send-side page faults served from swap"),
    RECEIVE_FAULTS_MINOR(5, "receive-side page faults served without I/O"),
    RECEIVE_FAULTS_MAJOR(6, "receive-side page faults served from swap"),
    INVALIDATED_TRANSLATIONS(7, "TLB and shadow table entries dropped on the kernel's request"),
    RNR_NAKS_SENT(8, "RNR NAKs sent (receive page faults)"),
    RNR_NAKS_RECEIVED(9, "RNR NAKs received"),
    RETRANSMITTED_PACKETS(10, "packets sent again"),
    ACK_TIMEOUTS(11, "acknowledgement timeouts"),
    SEQUENCE_NAKS_SENT(12, "NAKs sent for a sequence gap"),
    SEQUENCE_NAKS_RECEIVED(13, "NAKs received for a sequence gap"),
    DUPLICATE_PACKETS(14, "packets received that were already executed"),
    OUT_OF_ORDER_PACKETS(15, "packets received ahead of a gap and held"),
    DROPPED_PACKETS(16, "packets dropped: beyond the reorder window or for an unknown queue pair"),
    CREDIT_WAITS(17, "times a queue pair waited for receive credits"),
    PARKED_PARTS(18, "received parts parked in the system buffer"),
    PACKETS_SENT(19, "packets sent"),
    PACKETS_RECEIVED(20, "packets received"),
    BYTES_SENT(21, "payload bytes sent"),
    BYTES_RECEIVED(22, "payload bytes received"),
    WRITES_COMPLETED(23, "WRITE work requests completed successfully"),
    READS_COMPLETED(24, "READ work requests completed successfully"),
    ATOMICS_COMPLETED(25, "FETCH_ADD and COMPARE_SWAP work requests completed successfully"),
    NOTIFICATIONS_DELIVERED(26, "event counter notifications delivered"),
    COMPLETION_ERRORS(27, "work requests completed with an error"),
    REMOTE_ACCESS_NAKS_SENT(28, "requests refused for a bad key, address or right"),
    INVALID_REQUEST_NAKS_SENT(29, "malformed requests refused"),
    PREFETCHED_PAGES(30, "pages brought in or translated by advise"),
    LINK_WAITS(31, "times a queue pair waited for its lane to take more data (gRPC flow control)"),
    RECEIVE_FAULTS_FAILED(32, "receive-side page faults the kernel could not serve"),
    RECEIVE_BUFFER_FAULTS_MINOR(33, "page faults on posted receive buffers served without I/O"),
    RECEIVE_BUFFER_FAULTS_MAJOR(34, "page faults on posted receive buffers served from swap"),
    RECEIVE_BUFFER_PARKED_PARTS(35, "parts of SENDs parked in the system buffer (their receive buffer was not resident)"),
    RECEIVE_BUFFER_RNR_NAKS_SENT(36, "RNR NAKs sent for a page fault on a posted receive buffer"),
    NO_RECEIVE_RNR_NAKS_SENT(37, "RNR NAKs sent because no receive was posted"),
    SENDS_COMPLETED(38, "SEND work requests completed successfully"),
    RECEIVES_COMPLETED(39, "posted receives completed successfully"),
    RECEIVE_STALL_NANOS(40, "nanoseconds receives stalled while PIN_ON_MISS pinned their page (RDMA-write targets and receive buffers)"),
    TLB_BYPASSES(41, "PIN_ON_MISS translations used without a TLB entry: every way of the set was being filled by other misses"),
    PIN_ACCOUNTING_ERRORS(42, "pins the NIC gave back that the kernel did not hold for it (a bug: logged)"),
    TIMER_TASK_FAILURES(43, "NIC timer tasks (RNR back-off, acknowledgement sweep) that threw (logged; the timers go on)"),
    PREFETCH_FAULTS_MINOR(44, "page faults taken to prefetch (Advise) served without I/O"),
    PREFETCH_FAULTS_MAJOR(45, "page faults taken to prefetch (Advise) served from swap"),
    TLB_SOURCE_FIRST_HITS(46, "TLB hits on pages gathered to send (WRITE and SEND sources, READ sources), first transmissions"),
    TLB_SOURCE_FIRST_MISSES(47, "TLB misses on pages gathered to send, first transmissions"),
    TLB_SOURCE_AGAIN_HITS(48, "TLB hits on pages gathered to send, retransmissions"),
    TLB_SOURCE_AGAIN_MISSES(49, "TLB misses on pages gathered to send, retransmissions"),
    TLB_DESTINATION_FIRST_HITS(50, "TLB hits on pages written by received data (RDMA-write, atomic and READ-response targets, receive buffers), first transmissions"),
    TLB_DESTINATION_FIRST_MISSES(51, "TLB misses on pages written by received data, first transmissions"),
    TLB_DESTINATION_AGAIN_HITS(52, "TLB hits on pages written by received data, retransmissions"),
    TLB_DESTINATION_AGAIN_MISSES(53, "TLB misses on pages written by received data, retransmissions"),
    RATE_LIMIT_WAITS(54, "times a queue pair waited because its session had used its send allowance (pagewire.quota.sendBytesPerSecondPerSession)");

    private static final NicCounter[] TLB_LOOKUPS = {
        TLB_SOURCE_FIRST_HITS, TLB_SOURCE_FIRST_MISSES, TLB_SOURCE_AGAIN_HITS, TLB_SOURCE_AGAIN_MISSES,
        TLB_DESTINATION_FIRST_HITS, TLB_DESTINATION_FIRST_MISSES, TLB_DESTINATION_AGAIN_HITS, TLB_DESTINATION_AGAIN_MISSES,
    };

    /** The counter of TLB lookups of one kind: on a destination or a source page, for a retransmission or not, missed or hit. */
    public static NicCounter tlbLookup(boolean destination, boolean again, boolean miss) {
        return TLB_LOOKUPS[(destination ? 4 : 0) + (again ? 2 : 0) + (miss ? 1 : 0)];
    }

    private final int id;
    private final String label;

    NicCounter(int id, String label) {
        this.id = id;
        this.label = label;
    }

    public int id() {
        return id;
    }

    public String label() {
        return label;
    }
}
