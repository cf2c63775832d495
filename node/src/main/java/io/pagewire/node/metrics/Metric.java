package io.pagewire.node.metrics;

/**
 * Every Pagewire meter, defined once: its Micrometer name, base unit and help text. Prometheus sees
 * the name with dots as underscores, the unit appended and {@code _total} on counters
 * ({@link #prometheusName()}); the Grafana dashboards query exactly those names. Every meter also
 * carries a {@code node} tag; the tags listed are the others it is split by.
 */
public enum Metric {
    // ---- NIC translation ------------------------------------------------------------------------------
    TLB_HITS("pagewire.tlb.hits", null, Type.COUNTER, "Translations found in the NIC's TLB: every lookup, both sides, retransmissions and prefetch included", "mode"),
    TLB_MISSES("pagewire.tlb.misses", null, Type.COUNTER, "Translations not in the NIC's TLB: every lookup", "mode"),
    TLB_LOOKUPS("pagewire.tlb.lookups", null, Type.COUNTER,
            "NIC TLB lookups by side (source: pages gathered to send; destination: pages received data is written to), transmission (first, retransmission) and result (hit, miss)",
            "mode", "side", "transmission", "result"),
    TLB_EVICTIONS("pagewire.tlb.evictions", null, Type.COUNTER, "TLB entries replaced to make room", "mode"),
    TLB_ENTRIES("pagewire.tlb.entries", null, Type.GAUGE, "TLB entries in use, by state (valid, pinned) and capacity", "state"),
    SHADOW_ENTRIES("pagewire.shadow.entries", null, Type.GAUGE, "Translations in the shadow page table"),
    NIC_PAGE_FAULTS("pagewire.nic.page.faults", null, Type.COUNTER, "Page faults the NIC raised, by side (send for a WRITE's source or a READ's, receive for an RDMA-write, atomic or READ-response target, receive_buffer for a SEND's posted buffer, prefetch for Advise) and kind (minor, major)",
            "mode", "side", "kind"),
    FAULT_SERVICE_TIME("pagewire.nic.fault.service", "seconds", Type.TIMER,
            "Time the kernel took to serve a page fault the NIC raised (swap I/O, the handler's overhead, waits for the page), by origin (send, read_source, receive, read_target, atomic_target, receive_buffer, prefetch) and kind (minor, major)",
            "origin", "kind"),
    NIC_WAIT_TIME("pagewire.nic.wait", "seconds", Type.TIMER,
            "How long the NIC's work waited, by cause: receive_stall (a lane stalled while PIN_ON_MISS pinned a receive's page), system_buffer (a part parked in SHADOW's system buffer until its page came in), rnr (an ON_DEMAND requester's back-off after an RNR NAK), credits (a requester with data to send and no receive credits), rate_limit (a requester whose session had used its send allowance)",
            "cause"),
    INVALIDATED_TRANSLATIONS("pagewire.nic.invalidated.translations", null, Type.COUNTER,
            "NIC translations dropped because the kernel reclaimed or unmapped their pages"),
    PREFETCHED_PAGES("pagewire.prefetched.pages", null, Type.COUNTER, "Pages brought in or translated by advise"),

    // ---- reliable transport -------------------------------------------------------------------------------
    RNR_NAKS_SENT("pagewire.rnr.naks.sent", null, Type.COUNTER, "RNR NAKs sent for receive page faults"),
    RNR_NAKS_RECEIVED("pagewire.rnr.naks.received", null, Type.COUNTER, "RNR NAKs received from responders"),
    RETRANSMITTED_PACKETS("pagewire.retransmitted.packets", null, Type.COUNTER, "Packets sent again"),
    ACK_TIMEOUTS("pagewire.ack.timeouts", null, Type.COUNTER, "Acknowledgement timeouts"),
    SEQUENCE_NAKS_SENT("pagewire.sequence.naks.sent", null, Type.COUNTER, "NAKs sent for a packet sequence gap"),
    SEQUENCE_NAKS_RECEIVED("pagewire.sequence.naks.received", null, Type.COUNTER, "NAKs received for a packet sequence gap"),
    DUPLICATE_PACKETS("pagewire.duplicate.packets", null, Type.COUNTER, "Packets received that were already executed"),
    OUT_OF_ORDER_PACKETS("pagewire.out.of.order.packets", null, Type.COUNTER, "Packets received ahead of a gap and held"),
    DROPPED_PACKETS("pagewire.dropped.packets", null, Type.COUNTER, "Packets dropped: beyond the reorder window or for an unknown queue pair"),
    CREDIT_WAITS("pagewire.credit.waits", null, Type.COUNTER, "Times a queue pair waited for receive credits"),
    LINK_WAITS("pagewire.link.waits", null, Type.COUNTER, "Times a queue pair waited for its lane (gRPC flow control)"),
    RATE_LIMIT_WAITS("pagewire.rate.limit.waits", null, Type.COUNTER,
            "Times a queue pair waited because its session had used its send allowance (pagewire.quota.sendBytesPerSecondPerSession)"),
    PARKED_PARTS("pagewire.parked.parts", null, Type.COUNTER, "Received page-sized parts parked in the system buffer", "mode"),
    RECEIVE_STALL("pagewire.receive.stall", "seconds", Type.COUNTER,
            "Time receives stalled while PIN_ON_MISS pinned their destination page (U-Net/MM's lane stall)"),
    RECEIVES_COMPLETED("pagewire.receives.completed", null, Type.COUNTER, "Posted receives completed by a SEND or a WRITE_WITH_IMM"),
    RECEIVE_RNR_NAKS_SENT("pagewire.receive.rnr.naks.sent", null, Type.COUNTER,
            "RNR NAKs sent to SENDs and WRITE_WITH_IMMs, by cause (no receive posted, a fault on the posted buffer)", "cause"),
    RECEIVE_BUFFER_PARKED_PARTS("pagewire.receive.buffer.parked.parts", null, Type.COUNTER,
            "Parts of SENDs parked in the system buffer because their posted receive buffer was not resident"),
    NOTIFICATIONS("pagewire.notifications", null, Type.COUNTER, "Event counter notifications delivered"),
    COMPLETIONS("pagewire.completions", null, Type.COUNTER, "Work requests completed, by status", "status"),
    OPERATION_LATENCY("pagewire.operation.latency", "seconds", Type.TIMER,
            "Time from post to completion of successful work requests, by operation and local registration mode", "op", "mode"),
    QUEUE_PAIRS("pagewire.queue.pairs", null, Type.GAUGE, "Queue pairs open"),
    ENDPOINTS("pagewire.endpoints", null, Type.GAUGE, "Endpoints open"),
    RECEIVE_CREDITS("pagewire.receive.credits", null, Type.GAUGE, "Receive credits, granted to queue pairs and in all", "state"),

    // ---- kernel agent -------------------------------------------------------------------------------------
    KERNEL_PAGE_FAULTS("pagewire.kernel.page.faults", null, Type.COUNTER, "Page faults the kernel served, by origin (cpu, nic) and kind",
            "origin", "kind"),
    SWAP_INS("pagewire.swap.ins", "pages", Type.COUNTER, "Pages read from swap"),
    SWAP_OUTS("pagewire.swap.outs", "pages", Type.COUNTER, "Dirty pages written to swap"),
    EVICTIONS("pagewire.evictions", "pages", Type.COUNTER, "Frames taken from their pages by page replacement"),
    KERNEL_INVALIDATIONS("pagewire.kernel.invalidations", "pages", Type.COUNTER, "Pages whose translations NICs were told to drop"),
    PINS("pagewire.pins", null, Type.COUNTER, "Pin operations"),
    UNPINS("pagewire.unpins", null, Type.COUNTER, "Unpin operations"),
    PIN_LIMIT_REJECTIONS("pagewire.pin.limit.rejections", null, Type.COUNTER, "Pins refused by the memlock or node pin limit"),
    OUT_OF_MEMORY("pagewire.out.of.memory", null, Type.COUNTER, "Page faults that found no frame"),
    STALE_TRANSLATIONS("pagewire.stale.translations", null, Type.COUNTER, "DMA locks refused because a translation raced with reclaim"),
    MEMORY_PAGES("pagewire.memory.pages", "pages", Type.GAUGE, "Pages by state: resident, free (frames), swapped, pinned", "state"),
    PINNED_MEMORY("pagewire.pinned.memory", "bytes", Type.GAUGE, "Memory pinned on the node"),
    MEMLOCK_LIMIT("pagewire.memlock.limit", "bytes", Type.GAUGE, "Pinned memory one endpoint may hold"),
    NODE_PIN_LIMIT("pagewire.node.pin.limit", "bytes", Type.GAUGE, "Pinned memory the node may hold"),
    KERNEL_PIN_COST("pagewire.kernel.pin.cost", "seconds", Type.GAUGE, "CPU time the kernel spends per page it pins or unpins (pagewire.kernel.pinCostNs)"),
    PHYSICAL_MEMORY("pagewire.physical.memory", "bytes", Type.GAUGE, "Physical memory of the node"),
    SWAP_CAPACITY("pagewire.swap.capacity", "bytes", Type.GAUGE, "Swap space of the node"),
    SYSTEM_BUFFER_USED("pagewire.system.buffer.used", "bytes", Type.GAUGE, "System buffer holding parked data"),
    SYSTEM_BUFFER_PEAK("pagewire.system.buffer.peak", "bytes", Type.GAUGE, "The most of the system buffer that parked data ever held at once"),
    SYSTEM_BUFFER_CAPACITY("pagewire.system.buffer.capacity", "bytes", Type.GAUGE, "System buffer size"),
    SYSTEM_BUFFER_PARKED("pagewire.system.buffer.parked", "bytes", Type.COUNTER, "Bytes parked in the system buffer"),
    FAULT_QUEUE_DEPTH("pagewire.fault.queue.depth", null, Type.GAUGE, "NIC page faults queued or being served"),

    // ---- fabric -------------------------------------------------------------------------------------------
    LINK_SENT("pagewire.link.sent", "bytes", Type.COUNTER, "Payload bytes sent to a peer", "peer"),
    LINK_RECEIVED("pagewire.link.received", "bytes", Type.COUNTER, "Payload bytes received from a peer", "peer"),
    LINK_SENT_PACKETS("pagewire.link.sent.packets", null, Type.COUNTER, "Packets sent to a peer", "peer"),
    LINK_RECEIVED_PACKETS("pagewire.link.received.packets", null, Type.COUNTER, "Packets received from a peer", "peer"),
    LINK_LANES_UP("pagewire.link.lanes.up", null, Type.GAUGE, "Lanes up to a peer", "peer"),
    LINK_RECEIVE_STALL("pagewire.link.receive.stall", "seconds", Type.COUNTER,
            "Time packets from a peer waited while PIN_ON_MISS pinned their destination pages (U-Net/MM's stall, per lane)", "peer"),
    LINK_LANES_LOST("pagewire.link.lanes.lost", null, Type.COUNTER, "Lanes to a peer that broke", "peer"),
    INJECTED_FAULTS("pagewire.injected.faults", null, Type.COUNTER, "Faults injected on sent packets, by kind", "kind"),
    LINK_BATCHES_FAILED("pagewire.link.batches.failed", null, Type.COUNTER,
            "Received batches whose handling threw in the NIC: a bug, each logged with its stack trace"),

    // ---- applications -------------------------------------------------------------------------------------
    SESSIONS("pagewire.sessions", null, Type.GAUGE, "Application sessions open on the node (each one's endpoints end with it)"),
    CONTROL_PACED("pagewire.control.paced", null, Type.COUNTER,
            "Control-plane operations (session opens, allocations, registrations, queue pairs, counters) of callers over their rate"
                    + " (pagewire.quota.controlOpsPerSecond): started later, or refused for waiting too long", "outcome"),
    SECURITY_REFUSALS("pagewire.security.refusals", null, Type.COUNTER,
            "Calls and lanes refused for who sent them: no Pagewire identity in the certificate, a missing or wrong application token,"
                    + " a lane from a node that is not a peer or whose certificate names another", "reason");

    /** How a meter behaves. */
    public enum Type {
        COUNTER,
        GAUGE,
        TIMER
    }

    private final String meterName;
    private final String baseUnit;
    private final Type type;
    private final String help;
    private final String[] tags;

    Metric(String meterName, String baseUnit, Type type, String help, String... tags) {
        this.meterName = meterName;
        this.baseUnit = baseUnit;
        this.type = type;
        this.help = help;
        this.tags = tags;
    }

    public String meterName() {
        return meterName;
    }

    public String baseUnit() {
        return baseUnit;
    }

    public Type type() {
        return type;
    }

    public String help() {
        return help;
    }

    /** The tags besides {@code node} that split this meter. */
    public java.util.List<String> tags() {
        return java.util.List.of(tags);
    }

    /** The name Prometheus exposes (for a timer, the stem of its _count, _sum and _bucket series). */
    public String prometheusName() {
        String name = meterName.replace('.', '_');
        if (baseUnit != null && !name.endsWith("_" + baseUnit)) {
            name = name + "_" + baseUnit;
        }
        return type == Type.COUNTER ? name + "_total" : name;
    }
}
