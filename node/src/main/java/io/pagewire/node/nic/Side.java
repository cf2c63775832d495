package io.pagewire.node.nic;

import java.util.Locale;

/**
 * What a page is to the request that touched it, and so which way its data moves through the DMA
 * engine: the origin page faults are counted and timed by.
 */
public enum Side {
    /** Gathered at the requester to send: a WRITE's or a SEND's source. */
    SEND(true),
    /** Gathered at the responder to answer a READ: its source. */
    READ_SOURCE(true),
    /** Scattered at the responder: an RDMA WRITE's target. */
    RECEIVE(false),
    /** Scattered at the requester: where a READ's response lands. */
    READ_TARGET(false),
    /** Read and written at the responder: an atomic's target word. */
    ATOMIC_TARGET(false),
    /** Scattered at the responder: a SEND into a posted receive buffer. */
    RECEIVE_BUFFER(false),
    /** Faulted in ahead of use by an application's advice (ibv_advise_mr). */
    PREFETCH(false);

    private final boolean gathers;

    Side(boolean gathers) {
        this.gathers = gathers;
    }

    /** Whether the DMA engine reads the page (to send) rather than writes it. */
    boolean gathers() {
        return gathers;
    }

    /** Whether a lane waits while the page is translated: a receive stalls the packets behind it. */
    boolean stallsLane() {
        return !gathers && this != PREFETCH;
    }

    /** Whether the page serves a peer's request (the responder's side), which memory pressure may take from the NIC after. */
    boolean servesPeer() {
        return this == READ_SOURCE || this == RECEIVE || this == ATOMIC_TARGET || this == RECEIVE_BUFFER;
    }

    /** The metrics tag: {@code send}, {@code read_source}, {@code receive}, ... */
    public String tag() {
        return name().toLowerCase(Locale.ROOT);
    }
}
