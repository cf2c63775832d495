package io.pagewire.node.cm;

import io.pagewire.proto.fabric.CmMessage;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.function.Supplier;

/**
 * The connection manager's lock and what is decided under it: the events for programs' channels and
 * the messages for peers' managers, handed over only once the lock is released, so that a slow
 * stream holds up its own channel and nothing else. Each channel's events, and the messages to the
 * wire, leave in the order they were decided: one thread at a time drains each queue.
 */
final class CmOutbox {
    private static final System.Logger LOG = System.getLogger(CmOutbox.class.getName());

    private final CmWire wire;
    private final CmCounters counters;

    /** Messages for peers, in order; whether a thread is handing them to the wire. Guarded by this. */
    private final ArrayDeque<Outgoing> messages = new ArrayDeque<>();
    private boolean sending;
    /** Channels with events waiting. Guarded by this. */
    private final Set<CmChannel> ready = new LinkedHashSet<>();

    private record Outgoing(String node, CmMessage message) {
    }

    CmOutbox(CmWire wire, CmCounters counters) {
        this.wire = wire;
        this.counters = counters;
    }

    /** Runs {@code body} under the lock, then hands over what it decided. */
    <T> T locked(Supplier<T> body) {
        try {
            synchronized (this) {
                return body.get();
            }
        } finally {
            deliver();
        }
    }

    void locked(Runnable body) {
        locked(() -> {
            body.run();
            return null;
        });
    }

    /** Queues a message for {@code node}'s manager. Under the lock. */
    void send(String node, CmMessage message) {
        assert Thread.holdsLock(this);
        messages.add(new Outgoing(node, message));
    }

    /** Queues an event for the id's channel, made from the id as it is now. Under the lock. */
    void event(CmId id, int type, int status, int listenId) {
        event(id.channel, new CmEvents.Event(type, id.id, listenId, status, id.remote, id.src, id.srcPort, id.dst, id.dstPort, id.peerNode,
                id.peerLid, id.portSpace, id.qpType));
    }

    void event(CmChannel channel, CmEvents.Event event) {
        assert Thread.holdsLock(this);
        counters.events++;
        channel.waiting.add(event);
        ready.add(channel);
    }

    /**
     * Hands queued messages to the wire and events to their sinks, outside the lock. A thread that
     * finds a queue being drained by another leaves it to that one, which looks again before it stops.
     */
    private void deliver() {
        if (Thread.holdsLock(this)) {
            return; // an outer call on this thread delivers once it lets go
        }
        sendMessages();
        List<CmChannel> channels;
        synchronized (this) {
            channels = new ArrayList<>(ready);
            ready.clear();
        }
        for (CmChannel channel : channels) {
            deliverEvents(channel);
        }
    }

    private void sendMessages() {
        while (true) {
            List<Outgoing> batch;
            synchronized (this) {
                if (sending || messages.isEmpty()) {
                    return;
                }
                sending = true;
                batch = new ArrayList<>(messages);
                messages.clear();
            }
            try {
                for (Outgoing outgoing : batch) {
                    try {
                        wire.send(outgoing.node(), outgoing.message());
                    } catch (RuntimeException e) {
                        // As a message lost on the wire: the request's timer sends it again, or its peer's does.
                        LOG.log(System.Logger.Level.WARNING, "a CM message to " + outgoing.node() + " was not sent", e);
                    }
                }
            } finally {
                synchronized (this) {
                    sending = false;
                }
            }
        }
    }

    private void deliverEvents(CmChannel channel) {
        while (true) {
            List<CmEvents.Event> batch;
            synchronized (this) {
                if (channel.delivering || channel.waiting.isEmpty()) {
                    return;
                }
                channel.delivering = true;
                batch = new ArrayList<>(channel.waiting);
                channel.waiting.clear();
            }
            try {
                for (CmEvents.Event event : batch) {
                    try {
                        channel.sink.event(event);
                    } catch (RuntimeException e) {
                        LOG.log(System.Logger.Level.WARNING, "an rdma_cm event for channel " + channel.id + " was not delivered", e);
                    }
                }
            } finally {
                synchronized (this) {
                    channel.delivering = false;
                }
            }
        }
    }
}
