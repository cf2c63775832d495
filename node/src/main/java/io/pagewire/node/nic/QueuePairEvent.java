package io.pagewire.node.nic;

/**
 * What a queue pair tells its owner outside any completion, after ibverbs' asynchronous events
 * ({@code ibv_get_async_event}).
 */
public enum QueuePairEvent {
    /** The NIC moved the pair to ERROR itself (an error completion, a vanished peer): IBV_EVENT_QP_FATAL. */
    FATAL,
    /** The first request from the peer arrived while the pair was ready to receive only: IBV_EVENT_COMM_EST. */
    COMMUNICATION_ESTABLISHED,
    /** A pair drawing from a shared receive queue entered ERROR and takes no more receives from it: IBV_EVENT_QP_LAST_WQE_REACHED. */
    LAST_WQE_REACHED,
    /** Every request started before a send queue drain (SQD) finished: IBV_EVENT_SQ_DRAINED. */
    SEND_QUEUE_DRAINED;

    /** Who hears a session's queue pair events. */
    @FunctionalInterface
    public interface Listener {
        /** Called on a NIC thread, without any queue pair's lock held; must not block. */
        void raised(int qpn, QueuePairEvent event);
    }
}
