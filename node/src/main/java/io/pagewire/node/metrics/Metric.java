package io.pagewire.node.metrics;

import io.pagewire.config.Meter;
import java.util.List;

/**
 * The node's meters that are not counts of one NIC or kernel event (those are declared with their
 * counters, {@code NicCounter} and {@code KernelCounter}): gauges, timers, and series by status, peer
 * or caller. Each is declared once, with the tags its series are split by besides {@code node};
 * {@link NodeMetrics} binds them.
 */
public enum Metric {
    // ---- NIC ------------------------------------------------------------------------------------------------
    TLB_ENTRIES(Meter.gauge("pagewire.tlb.entries", "TLB entries in use, by state (valid, pinned) and capacity"), "state"),
    SHADOW_ENTRIES(Meter.gauge("pagewire.shadow.entries", "Translations in the shadow page table")),
    CONTEXT_CACHE_ENTRIES(Meter.gauge("pagewire.nic.context.cache.entries",
            "Queue pair and region contexts the NIC's context cache holds (0: none modelled, every context on the chip)")),
    MEMORY_PRESSURE(Meter.gauge("pagewire.nic.memory.pressure",
            "The share of peers' touches after which the injected memory pressure takes the page from the NIC"
                    + " (pagewire.nic.reclaimAfterAccess), at the depth it takes it to (pagewire.nic.reclaimDepth: minor, major; 0 at the"
                    + " other)"), "depth"),
    FAULT_ANSWER(Meter.gauge("pagewire.nic.fault.answer",
            "How the responder answers a request that meets a NIC page fault (pagewire.nic.faultAnswer): 1 for the answer set (rnr_nak,"
                    + " drop), 0 for the other"), "answer"),
    FAULT_SERVICE_TIME(Meter.timer("pagewire.nic.fault.service",
            "Time the kernel took to serve a page fault the NIC raised (swap I/O, the handler's overhead, waits for the page), by origin"
                    + " (send, read_source, receive, read_target, atomic_target, receive_buffer, prefetch) and kind (minor, major)"),
            "origin", "kind"),
    NIC_WAIT_TIME(Meter.timer("pagewire.nic.wait",
            "How long the NIC's work waited, by cause: receive_stall (a lane stalled while PIN_ON_MISS pinned a receive's page),"
                    + " system_buffer (a part parked in SHADOW's system buffer until its page came in), rnr (an ON_DEMAND requester's"
                    + " back-off after an RNR NAK), credits (a requester with data to send and no receive credits), rate_limit (a"
                    + " requester whose session had used its send allowance)"), "cause"),
    COMPLETIONS(Meter.counter("pagewire.completions", "Work requests completed, by status"), "status"),
    OPERATION_LATENCY(Meter.timer("pagewire.operation.latency",
            "Time from post to completion of successful signalled work requests, by operation and local registration mode"), "op", "mode"),
    QUEUE_PAIRS(Meter.gauge("pagewire.queue.pairs", "Queue pairs open")),
    ENDPOINTS(Meter.gauge("pagewire.endpoints", "Endpoints open")),
    RECEIVE_CREDITS(Meter.gauge("pagewire.receive.credits", "Receive credits, granted to queue pairs and in all"), "state"),

    // ---- kernel agent ---------------------------------------------------------------------------------------
    MEMORY_PAGES(Meter.gauge("pagewire.memory.pages", "pages", "Pages by state: resident, free (frames), swapped, pinned"), "state"),
    PINNED_MEMORY(Meter.gauge("pagewire.pinned.memory", "bytes", "Memory pinned on the node")),
    MEMLOCK_LIMIT(Meter.gauge("pagewire.memlock.limit", "bytes", "Pinned memory one endpoint may hold")),
    NODE_PIN_LIMIT(Meter.gauge("pagewire.node.pin.limit", "bytes", "Pinned memory the node may hold")),
    KERNEL_PIN_COST(Meter.gauge("pagewire.kernel.pin.cost", "seconds",
            "CPU time the kernel spends per page it pins or unpins (pagewire.kernel.pinCostNs)")),
    PHYSICAL_MEMORY(Meter.gauge("pagewire.physical.memory", "bytes", "Physical memory of the node")),
    SWAP_CAPACITY(Meter.gauge("pagewire.swap.capacity", "bytes", "Swap space of the node")),
    SWAP_READ_LATENCY(Meter.gauge("pagewire.swap.read.latency", "seconds",
            "What the modelled swap device takes to read a page in (pagewire.kernel.swapDevice, pagewire.kernel.swapReadLatencyNs)")),
    CALLER_SHARE(Meter.gauge("pagewire.caller.share",
            "The most of each node-wide pool (sessions, frames and swap, pins, credits, work requests) one application may hold")),
    SYSTEM_BUFFER_USED(Meter.gauge("pagewire.system.buffer.used", "bytes", "System buffer holding parked data")),
    SYSTEM_BUFFER_PEAK(Meter.gauge("pagewire.system.buffer.peak", "bytes", "The most of the system buffer that parked data ever held at once")),
    SYSTEM_BUFFER_CAPACITY(Meter.gauge("pagewire.system.buffer.capacity", "bytes", "System buffer size")),
    FAULT_QUEUE_DEPTH(Meter.gauge("pagewire.fault.queue.depth", "NIC page faults queued or being served")),

    // ---- fabric ---------------------------------------------------------------------------------------------
    LINK_SENT(Meter.counter("pagewire.link.sent", "bytes", "Payload bytes sent to a peer"), "peer"),
    LINK_RECEIVED(Meter.counter("pagewire.link.received", "bytes", "Payload bytes received from a peer"), "peer"),
    LINK_SENT_PACKETS(Meter.counter("pagewire.link.sent.packets", "Packets sent to a peer"), "peer"),
    LINK_RECEIVED_PACKETS(Meter.counter("pagewire.link.received.packets", "Packets received from a peer"), "peer"),
    LINK_LANES_UP(Meter.gauge("pagewire.link.lanes.up", "Lanes up to a peer"), "peer"),
    LINK_RECEIVE_STALL(Meter.counter("pagewire.link.receive.stall", "seconds",
            "Time packets from a peer waited while PIN_ON_MISS pinned their destination pages (U-Net/MM's stall, per lane)"), "peer"),
    LINK_LANES_LOST(Meter.counter("pagewire.link.lanes.lost", "Lanes to a peer that broke"), "peer"),
    INJECTED_LOSS(Meter.gauge("pagewire.fabric.loss.rate",
            "The share of sent packets the fabric's fault injection drops (pagewire.fabric.lossRate)")),
    INJECTED_FAULTS(Meter.counter("pagewire.injected.faults", "Faults injected on sent packets, by kind"), "kind"),
    LINK_BATCHES_FAILED(Meter.counter("pagewire.link.batches.failed",
            "Received batches whose handling threw in the NIC: a bug, each logged with its stack trace")),

    // ---- applications ---------------------------------------------------------------------------------------
    SESSIONS(Meter.gauge("pagewire.sessions", "Application sessions open on the node (each one's endpoints end with it)")),
    SESSIONS_ON_RINGS(Meter.gauge("pagewire.sessions.rings",
            "Open sessions whose application posts and polls through shared-memory rings (co-located); the rest use their gRPC stream")),
    CM_EXCHANGES(Meter.counter("pagewire.cm.exchanges",
            "The connection manager's exchanges (rdma_cm): requests sent and received, connections established, rejects,"
                    + " UNREACHABLE (no answer after every retry), disconnects, messages sent again, address errors"), "kind"),
    CM_IDS(Meter.gauge("pagewire.cm.ids", "rdma_cm ids alive on the node, of every event channel")),
    CONTROL_PACED(Meter.counter("pagewire.control.paced",
            "Control-plane operations (session opens, allocations, registrations, queue pairs, counters) of callers over their rate"
                    + " (pagewire.quota.controlOpsPerSecond): started later, or refused for waiting too long"), "outcome"),
    BAD_INPUT(Meter.counter("pagewire.bad.input", "Malformed input refused with INVALID_ARGUMENT, by where it came in: verbs (a call or"
            + " session message that does not parse), verbs_socket (a frame that breaks the socket's protocol), lane (a peer's frame that"
            + " does not parse); the log has one line per caller per 10 s"), "source"),
    SECURITY_REFUSALS(Meter.counter("pagewire.security.refusals",
            "Calls and lanes refused for who sent them: no Pagewire identity in the certificate, a missing or wrong application token,"
                    + " a lane from a node that is not a peer or whose certificate names another"), "reason");

    private final Meter meter;
    private final List<String> tagKeys;

    Metric(Meter meter, String... tagKeys) {
        this.meter = meter;
        this.tagKeys = List.of(tagKeys);
    }

    public Meter meter() {
        return meter;
    }

    /** The tags besides {@code node} that split this meter. */
    public List<String> tagKeys() {
        return tagKeys;
    }
}
