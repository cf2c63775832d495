package io.pagewire.node.cm;

import java.util.ArrayDeque;

/** A program's rdma_cm event channel: who opened it, where its ids' events go, and those not yet handed over. */
public final class CmChannel {
    /** Where a channel's events go (its stream to the program). Called outside the manager's lock, by one thread at a time. */
    public interface Sink {
        void event(CmEvents.Event event);

        /** The channel cannot go on (its stream failed): end it. */
        void close();
    }

    final long id;
    final long key;
    final String caller;
    final Sink sink;
    /** Events decided, not yet handed to the sink; whether a thread is handing them over. Guarded by the manager's lock. */
    final ArrayDeque<CmEvents.Event> waiting = new ArrayDeque<>();
    boolean delivering;

    CmChannel(long id, long key, String caller, Sink sink) {
        this.id = id;
        this.key = key;
        this.caller = caller;
        this.sink = sink;
    }

    public long id() {
        return id;
    }

    /** The secret a program shows with the channel's number, so that no other caller's request reaches its ids. */
    public long key() {
        return key;
    }
}
