package io.pagewire.node.verbs;

import io.grpc.stub.ServerCallStreamObserver;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.proto.verbs.CompletionBatch;
import io.pagewire.proto.verbs.CompletionEvent;
import io.pagewire.proto.verbs.CompletionStatus;
import io.pagewire.proto.verbs.CounterChanged;
import io.pagewire.proto.verbs.PostRefused;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.proto.verbs.WorkRequest;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.LongConsumer;

/**
 * One application's session: its endpoint, the key that proves ownership, the completion queue of
 * its queue pairs, and the stream that carries completions and counter changes back. The endpoint
 * closes when the session ends.
 */
final class Session {
    final Endpoint endpoint;
    final long key;
    final CompletionQueue completions;
    private final ServerCallStreamObserver<SessionEvent> events;
    private final Map<Integer, LongConsumer> watches = new ConcurrentHashMap<>();
    /** The event stream ended (completed by us, or failed); nothing more is written to it. */
    private boolean streamEnded;
    private boolean endpointClosed;

    Session(Endpoint endpoint, long key, ServerCallStreamObserver<SessionEvent> events) {
        this.endpoint = endpoint;
        this.key = key;
        this.events = events;
        this.completions = endpoint.nic().createCompletionQueue();
        completions.setHandler(new CompletionQueue.Handler() {
            @Override
            public void completed(Completion c) {
                collect(c);
            }

            @Override
            public void flush() {
                flushCompletions();
            }
        });
    }

    /** Completions collected since the NIC last finished a piece of work. Guarded by this. */
    private CompletionBatch.Builder pending = CompletionBatch.newBuilder();

    private synchronized void collect(Completion c) {
        pending.addCompletions(CompletionEvent.newBuilder()
                .setWrId(c.wrId())
                .setQpn(c.qpn())
                .setOpcode(opcode(c.opcode()))
                .setStatus(CompletionStatus.valueOf(c.status().name()))
                .setBytes(c.bytes())
                .setValue(c.value())
                .setError(c.error() == null ? "" : c.error()));
    }

    /** Sends the collected completions as one message. */
    private synchronized void flushCompletions() {
        if (pending.getCompletionsCount() == 0) {
            return;
        }
        CompletionBatch batch = pending.build();
        pending = CompletionBatch.newBuilder();
        send(SessionEvent.newBuilder().setCompletions(batch).build());
    }

    synchronized void refused(int qpn, long wrId, String error) {
        flushCompletions(); // keep the order the application sees

        send(SessionEvent.newBuilder().setRefused(PostRefused.newBuilder().setQpn(qpn).setWrId(wrId).setError(error)).build());
    }

    void watch(EventCounter counter) {
        LongConsumer handler = value -> send(SessionEvent.newBuilder()
                .setCounter(CounterChanged.newBuilder().setCounterId(counter.id()).setValue(value)).build());
        if (watches.putIfAbsent(counter.id(), handler) == null) {
            counter.addHandler(handler);
            handler.accept(counter.value());
        }
    }

    void unwatch(EventCounter counter) {
        LongConsumer handler = watches.remove(counter.id());
        if (handler != null) {
            counter.removeHandler(handler);
        }
    }

    /** Writes an event; the NIC calls this from its own threads, so writes are serialised. */
    synchronized void send(SessionEvent event) {
        if (streamEnded || events.isCancelled()) {
            return;
        }
        try {
            events.onNext(event);
        } catch (RuntimeException e) {
            streamEnded = true;
        }
    }

    /** Ends the session: the endpoint closes, releasing its queue pairs, pins and memory. */
    void close() {
        synchronized (this) {
            if (endpointClosed) {
                return;
            }
            endpointClosed = true;
        }
        for (Map.Entry<Integer, LongConsumer> watch : watches.entrySet()) {
            EventCounter counter = endpoint.eventCounter(watch.getKey());
            if (counter != null) {
                counter.removeHandler(watch.getValue());
            }
        }
        endpoint.close();
    }

    /** Completes the event stream, telling the application the endpoint is gone. */
    synchronized void complete() {
        if (!streamEnded) {
            streamEnded = true;
            try {
                events.onCompleted();
            } catch (RuntimeException ignored) {
                // The client is already gone.
            }
        }
    }

    static WorkRequest.Opcode opcode(Completion.Opcode opcode) {
        return WorkRequest.Opcode.valueOf(opcode.name());
    }
}
