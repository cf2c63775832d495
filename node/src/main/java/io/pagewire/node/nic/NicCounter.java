package io.pagewire.node.nic;

import io.pagewire.config.CountedEvent;
import io.pagewire.config.Meter;
import java.util.List;

/**
 * The NIC's event counters, each declared once with the meter series that exports it. {@link NicCounters}
 * keeps each per registration mode; a counter marked {@code byMode} is exported with a {@code mode} tag,
 * the others as their total.
 */
public enum NicCounter implements CountedEvent {
    TLB_HITS(Meter.counter("pagewire.tlb.hits",
            "Translations found in the NIC's TLB: every lookup, both sides, retransmissions and prefetch included"), true),
    TLB_MISSES(Meter.counter("pagewire.tlb.misses", "Translations not in the NIC's TLB: every lookup"), true),
    TLB_EVICTIONS(Meter.counter("pagewire.tlb.evictions", "TLB entries replaced to make room"), true),
    TLB_BYPASSES(Meter.counter("pagewire.tlb.bypasses",
            "PIN_ON_MISS translations used without a TLB entry: every way of the set was being filled by other misses"), true),
    TLB_SOURCE_FIRST_HITS(Family.TLB_LOOKUPS, true, "side", "source", "transmission", "first", "result", "hit"),
    TLB_SOURCE_FIRST_MISSES(Family.TLB_LOOKUPS, true, "side", "source", "transmission", "first", "result", "miss"),
    TLB_SOURCE_AGAIN_HITS(Family.TLB_LOOKUPS, true, "side", "source", "transmission", "retransmission", "result", "hit"),
    TLB_SOURCE_AGAIN_MISSES(Family.TLB_LOOKUPS, true, "side", "source", "transmission", "retransmission", "result", "miss"),
    TLB_DESTINATION_FIRST_HITS(Family.TLB_LOOKUPS, true, "side", "destination", "transmission", "first", "result", "hit"),
    TLB_DESTINATION_FIRST_MISSES(Family.TLB_LOOKUPS, true, "side", "destination", "transmission", "first", "result", "miss"),
    TLB_DESTINATION_AGAIN_HITS(Family.TLB_LOOKUPS, true, "side", "destination", "transmission", "retransmission", "result", "hit"),
    TLB_DESTINATION_AGAIN_MISSES(Family.TLB_LOOKUPS, true, "side", "destination", "transmission", "retransmission", "result", "miss"),
    SEND_FAULTS_MINOR(Family.PAGE_FAULTS, true, "side", "send", "kind", "minor"),
    SEND_FAULTS_MAJOR(Family.PAGE_FAULTS, true, "side", "send", "kind", "major"),
    RECEIVE_FAULTS_MINOR(Family.PAGE_FAULTS, true, "side", "receive", "kind", "minor"),
    RECEIVE_FAULTS_MAJOR(Family.PAGE_FAULTS, true, "side", "receive", "kind", "major"),
    RECEIVE_BUFFER_FAULTS_MINOR(Family.PAGE_FAULTS, true, "side", "receive_buffer", "kind", "minor"),
    RECEIVE_BUFFER_FAULTS_MAJOR(Family.PAGE_FAULTS, true, "side", "receive_buffer", "kind", "major"),
    PREFETCH_FAULTS_MINOR(Family.PAGE_FAULTS, true, "side", "prefetch", "kind", "minor"),
    PREFETCH_FAULTS_MAJOR(Family.PAGE_FAULTS, true, "side", "prefetch", "kind", "major"),
    RECEIVE_FAULTS_FAILED(Meter.counter("pagewire.nic.page.faults.failed",
            "Page faults the NIC raised for peers' requests that the kernel could not serve (the request is refused)"), false),
    INVALIDATED_TRANSLATIONS(Meter.counter("pagewire.nic.invalidated.translations",
            "NIC translations (TLB and shadow table entries) dropped because the kernel reclaimed or unmapped their pages"), false),
    PRESSURE_RECLAIMS(Meter.counter("pagewire.nic.pressure.reclaims",
            "Pages the injected memory pressure (pagewire.nic.reclaimAfterAccess) took from the NIC just after a peer touched them, at the"
                    + " depth set (a page a MAJOR pressure could not page out, one pinned by its registration, say, is not counted)"),
            true),
    CONTEXT_QP_HITS(Family.CONTEXT_CACHE, false, "kind", "queue_pair", "result", "hit"),
    CONTEXT_QP_MISSES(Family.CONTEXT_CACHE, false, "kind", "queue_pair", "result", "miss"),
    CONTEXT_REGION_HITS(Family.CONTEXT_CACHE, false, "kind", "region", "result", "hit"),
    CONTEXT_REGION_MISSES(Family.CONTEXT_CACHE, false, "kind", "region", "result", "miss"),
    PREFETCHED_PAGES(Meter.counter("pagewire.prefetched.pages", "Pages brought in or translated by advise"), false),
    RNR_NAKS_SENT(Meter.counter("pagewire.rnr.naks.sent", "RNR NAKs sent: receive page faults, and SENDs with no receive posted"), false),
    RNR_NAKS_RECEIVED(Meter.counter("pagewire.rnr.naks.received", "RNR NAKs received from responders"), false),
    FAULT_DROPPED_REQUESTS(Meter.counter("pagewire.fault.dropped.requests",
            "Requests a responder dropped without an answer on a NIC page fault (pagewire.nic.faultAnswer=DROP)"), false),
    NO_RECEIVE_RNR_NAKS_SENT(Family.RECEIVE_RNR_NAKS, false, "cause", "no_receive"),
    RECEIVE_BUFFER_RNR_NAKS_SENT(Family.RECEIVE_RNR_NAKS, false, "cause", "buffer_fault"),
    RETRANSMITTED_AFTER_ACK_TIMEOUT(Family.RETRANSMITTED, false, "cause", "ack_timeout"),
    RETRANSMITTED_AFTER_RNR_NAK(Family.RETRANSMITTED, false, "cause", "rnr_nak"),
    RETRANSMITTED_AFTER_SEQUENCE_NAK(Family.RETRANSMITTED, false, "cause", "sequence_nak"),
    RETRANSMITTED_AFTER_LANE_LOSS(Family.RETRANSMITTED, false, "cause", "lane_replay"),
    RETRANSMITTED_READ_REFETCH(Family.RETRANSMITTED, false, "cause", "read_refetch"),
    ACK_TIMEOUTS(Meter.counter("pagewire.ack.timeouts", "Acknowledgement timeouts"), false),
    SEQUENCE_NAKS_SENT(Meter.counter("pagewire.sequence.naks.sent", "NAKs sent for a packet sequence gap"), false),
    SEQUENCE_NAKS_RECEIVED(Meter.counter("pagewire.sequence.naks.received", "NAKs received for a packet sequence gap"), false),
    REMOTE_ACCESS_NAKS_SENT(Family.REFUSALS, false, "reason", "remote_access"),
    INVALID_REQUEST_NAKS_SENT(Family.REFUSALS, false, "reason", "invalid_request"),
    DUPLICATE_PACKETS(Meter.counter("pagewire.duplicate.packets", "Packets received that were already executed"), false),
    OUT_OF_ORDER_PACKETS(Meter.counter("pagewire.out.of.order.packets", "Packets received ahead of a gap and held"), false),
    UNRELIABLE_DROPPED_INCOMPLETE(Family.UNRELIABLE_DROPS, false, "cause", "incomplete"),
    UNRELIABLE_DROPPED_NO_RECEIVE(Family.UNRELIABLE_DROPS, false, "cause", "no_receive"),
    UNRELIABLE_DROPPED_FAULT(Family.UNRELIABLE_DROPS, false, "cause", "fault"),
    UNRELIABLE_DROPPED_REFUSED(Family.UNRELIABLE_DROPS, false, "cause", "refused"),
    UNRELIABLE_DROPPED_QKEY(Family.UNRELIABLE_DROPS, false, "cause", "qkey"),
    UNRELIABLE_DROPPED_TOO_LONG(Family.UNRELIABLE_DROPS, false, "cause", "too_long"),
    UNRELIABLE_DROPPED_UNREACHABLE(Family.UNRELIABLE_DROPS, false, "cause", "unreachable"),
    DROPPED_PACKETS(Meter.counter("pagewire.dropped.packets", "Packets dropped: beyond the reorder window or for an unknown queue pair"),
            false),
    CREDIT_WAITS(Meter.counter("pagewire.credit.waits", "Times a queue pair waited for receive credits"), false),
    LINK_WAITS(Meter.counter("pagewire.link.waits", "Times a queue pair waited for its lane (gRPC flow control)"), false),
    RATE_LIMIT_WAITS(Meter.counter("pagewire.rate.limit.waits",
            "Times a queue pair waited because its session had used its send allowance (pagewire.quota.sendBytesPerSecondPerSession)"),
            false),
    PARKED_PARTS(Meter.counter("pagewire.parked.parts", "Received page-sized parts parked in the system buffer"), true),
    REGISTRATIONS(Meter.counter("pagewire.regions.registered", "Memory regions registered (ibv_reg_mr), by the mode they got"), true),
    RECEIVE_BUFFER_PARKED_PARTS(Meter.counter("pagewire.receive.buffer.parked.parts",
            "Parts of SENDs parked in the system buffer because their posted receive buffer was not resident"), false),
    RECEIVE_STALL_NANOS(Meter.counter("pagewire.receive.stall", "seconds",
            "Time receives stalled while PIN_ON_MISS pinned their destination page (U-Net/MM's lane stall)"), false) {
        @Override
        public double scale() {
            return 1e-9;
        }
    },
    PACKETS_SENT(Family.PACKETS, false, "direction", "sent"),
    PACKETS_RECEIVED(Family.PACKETS, false, "direction", "received"),
    BYTES_SENT(Family.PAYLOAD, false, "direction", "sent"),
    BYTES_RECEIVED(Family.PAYLOAD, false, "direction", "received"),
    WRITES_COMPLETED(Family.OPERATIONS, false, "op", "write"),
    READS_COMPLETED(Family.OPERATIONS, false, "op", "read"),
    ATOMICS_COMPLETED(Family.OPERATIONS, false, "op", "atomic"),
    SENDS_COMPLETED(Family.OPERATIONS, false, "op", "send"),
    RECEIVES_COMPLETED(Meter.counter("pagewire.receives.completed", "Posted receives completed by a SEND or a WRITE_WITH_IMM"), false),
    NOTIFICATIONS_DELIVERED(Meter.counter("pagewire.notifications", "Event counter notifications delivered"), false),
    COMPLETION_ERRORS(Meter.counter("pagewire.completion.errors", "Work requests and receives completed with an error"), false),
    PIN_ACCOUNTING_ERRORS(Meter.counter("pagewire.nic.pin.accounting.errors",
            "Pins the NIC gave back that the kernel did not hold for it (a bug: each is logged)"), false),
    TIMER_TASK_FAILURES(Meter.counter("pagewire.nic.timer.failures",
            "NIC timer tasks (RNR back-off, acknowledgement sweep) that threw (each is logged; the timers go on)"), false);

    /** Meters whose series several counters make up. */
    private static final class Family {
        static final Meter TLB_LOOKUPS = Meter.counter("pagewire.tlb.lookups",
                "NIC TLB lookups by side (source: pages gathered to send; destination: pages received data is written to),"
                        + " transmission (first, retransmission) and result (hit, miss)");
        static final Meter PAGE_FAULTS = Meter.counter("pagewire.nic.page.faults",
                "Page faults the NIC raised, by side (send for a WRITE's source or a READ's, receive for an RDMA-write, atomic or"
                        + " READ-response target, receive_buffer for a SEND's posted buffer, prefetch for Advise) and kind (minor, major)");
        static final Meter RECEIVE_RNR_NAKS = Meter.counter("pagewire.receive.rnr.naks.sent",
                "RNR NAKs sent to SENDs and WRITE_WITH_IMMs, by cause (no receive posted, a fault on the posted buffer)");
        static final Meter REFUSALS = Meter.counter("pagewire.refusal.naks.sent",
                "Requests the responder refused, by reason (remote_access: a bad key, address or right; invalid_request: malformed)");
        static final Meter RETRANSMITTED = Meter.counter("pagewire.retransmitted.packets",
                "Packets sent again, by cause: ack_timeout (the acknowledgement timer expired), rnr_nak (after an RNR back-off),"
                        + " sequence_nak (the responder saw a gap), lane_replay (a lane broke with packets on it), read_refetch"
                        + " (READ responses dropped for a local page fault, asked for again)");
        static final Meter UNRELIABLE_DROPS = Meter.counter("pagewire.unreliable.drops",
                "Messages an unreliable (UC, UD) pair dropped, by cause: incomplete (a gap in the message's sequence), no_receive (a"
                        + " SEND with no receive posted), fault (its memory was not resident, or the system buffer full), refused (a bad key,"
                        + " address, right or length), qkey (a datagram whose Q_Key is not the pair's), too_long (a datagram longer than"
                        + " the MTU, completed unsent), unreachable (a datagram to an address no reachable node has)");
        static final Meter CONTEXT_CACHE = Meter.counter("pagewire.nic.context.cache.lookups",
                "Reads of queue pair and region contexts in the NIC's context cache (pagewire.nic.contextCacheEntries; none counted without"
                        + " one), by kind (queue_pair: a packet sent or received; region: a request naming its key) and result (hit, miss)");
        static final Meter PACKETS = Meter.counter("pagewire.nic.packets", "Packets the NIC sent and received");
        static final Meter PAYLOAD = Meter.counter("pagewire.nic.payload", "bytes", "Payload bytes the NIC sent and received");
        static final Meter OPERATIONS = Meter.counter("pagewire.operations.completed",
                "Work requests completed successfully, by operation (write: every WRITE flavour; atomic: FETCH_ADD and COMPARE_SWAP)");
    }

    private static final NicCounter[] TLB_LOOKUPS = {
        TLB_SOURCE_FIRST_HITS, TLB_SOURCE_FIRST_MISSES, TLB_SOURCE_AGAIN_HITS, TLB_SOURCE_AGAIN_MISSES,
        TLB_DESTINATION_FIRST_HITS, TLB_DESTINATION_FIRST_MISSES, TLB_DESTINATION_AGAIN_HITS, TLB_DESTINATION_AGAIN_MISSES,
    };

    /** Every cause of a retransmission: their sum is every packet sent again. */
    public static final List<NicCounter> RETRANSMISSIONS = List.of(RETRANSMITTED_AFTER_ACK_TIMEOUT, RETRANSMITTED_AFTER_RNR_NAK,
            RETRANSMITTED_AFTER_SEQUENCE_NAK, RETRANSMITTED_AFTER_LANE_LOSS, RETRANSMITTED_READ_REFETCH);

    /** The counter of TLB lookups of one kind: on a destination or a source page, for a retransmission or not, missed or hit. */
    public static NicCounter tlbLookup(boolean destination, boolean again, boolean miss) {
        return TLB_LOOKUPS[(destination ? 4 : 0) + (again ? 2 : 0) + (miss ? 1 : 0)];
    }

    private final Meter meter;
    private final boolean byMode;
    private final List<String> tags;

    NicCounter(Meter meter, boolean byMode, String... tags) {
        this.meter = meter;
        this.byMode = byMode;
        this.tags = List.of(tags);
    }

    /** Its index in {@link NicCounters}. */
    int id() {
        return ordinal();
    }

    @Override
    public Meter meter() {
        return meter;
    }

    @Override
    public List<String> tags() {
        return tags;
    }

    /** Whether it is exported per registration mode (a {@code mode} tag) rather than as its total. */
    public boolean byMode() {
        return byMode;
    }
}
