package io.pagewire.node.nic;

/** How a work request ended, after {@code ibv_wc_status}. */
public enum CompletionStatus {
    SUCCESS,
    /** The local region, key, address or access right of the request was bad. */
    LOCAL_PROTECTION_ERROR,
    /** The responder refused: bad rkey, address outside the region, missing right, unknown event counter. */
    REMOTE_ACCESS_ERROR,
    /** The responder found the request malformed. */
    REMOTE_INVALID_REQUEST_ERROR,
    /** The responder could not execute the request (e.g. its memory is exhausted). */
    REMOTE_OPERATIONAL_ERROR,
    /** No acknowledgement after the configured number of retransmissions. */
    RETRY_EXCEEDED,
    /** Receiver not ready after the configured number of RNR retries. */
    RNR_RETRY_EXCEEDED,
    /** A received message was longer than the posted receive buffer it was to land in. */
    LOCAL_LENGTH_ERROR,
    /** A local page could not be brought in (memory exhausted, pin limit). */
    LOCAL_MEMORY_ERROR,
    /** The queue pair had failed or was closed before this request could run. */
    FLUSHED,
    /** A memory window could not be bound: a bad window, region, range or right. */
    MEMORY_WINDOW_BIND_ERROR
}
