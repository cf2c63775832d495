package io.pagewire.client;

/** What a queue pair tells its owner outside any completion, after ibverbs' asynchronous QP events. */
public enum QueuePairEvent {
    /** The NIC moved the pair to an error state itself (a failed request, a vanished peer): IBV_EVENT_QP_FATAL. */
    FATAL,
    /** The peer's first request arrived before this pair was ready to send: IBV_EVENT_COMM_EST. */
    COMMUNICATION_ESTABLISHED,
    /** A pair on a shared receive queue failed and takes no more receives from it: IBV_EVENT_QP_LAST_WQE_REACHED. */
    LAST_WQE_REACHED,
    /** Every request started before {@link QueuePair#drainSendQueue} finished: IBV_EVENT_SQ_DRAINED. */
    SEND_QUEUE_DRAINED
}
