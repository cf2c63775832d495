package io.pagewire.node.verbs;

import io.grpc.Status;
import io.grpc.stub.ServerCallStreamObserver;
import io.pagewire.kernel.AddressSpace;
import io.pagewire.kernel.InvalidationReason;
import io.pagewire.kernel.MemoryListener;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.EventCounter;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.SharedReceiveQueue;
import io.pagewire.proto.verbs.CompletionBatch;
import io.pagewire.proto.verbs.CompletionEvent;
import io.pagewire.proto.verbs.CounterChanged;
import io.pagewire.proto.verbs.Doorbell;
import io.pagewire.proto.verbs.PostRefused;
import io.pagewire.proto.verbs.RingsActive;
import io.pagewire.proto.verbs.RingsAttached;
import io.pagewire.proto.verbs.RingsOffered;
import io.pagewire.proto.verbs.QueuePairEventRaised;
import io.pagewire.proto.verbs.SessionEvent;
import io.pagewire.ring.SessionRings;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;

/**
 * One application's session: its endpoint, the key that proves ownership, the completion queue of
 * its queue pairs, and the stream that carries completions and counter changes back. The endpoint
 * closes when the session ends.
 */
final class Session {
    private static final System.Logger LOG = System.getLogger(Session.class.getName());
    final Endpoint endpoint;
    /** The node's memory file, which an application on the node's host maps (null: the node's memory is anonymous). */
    private final Path memoryFile;
    /** Who opened it, as the node's caller authentication named them: whose share of the node it counts against. */
    final String caller;
    final long key;
    final CompletionQueue completions;
    private final ServerCallStreamObserver<SessionEvent> events;
    private final Map<Integer, LongConsumer> watches = new ConcurrentHashMap<>();
    /** AwaitEventCounter calls on this session's counters still waiting: the session's end answers them. */
    private final Set<CounterWait> counterWaits = ConcurrentHashMap.newKeySet();
    /** The event stream ended (completed by us, or failed); nothing more is written to it. */
    private boolean streamEnded;
    private boolean endpointClosed;

    private final RingPort ringPort;
    private volatile Bell bell;
    /** Serialises the session's allocations, so that its virtual-memory quota holds. */
    final Object allocation = new Object();

    /** The node's end of a session's bell: wakes the application's ring agent; false when it cannot (the stream must). */
    interface Bell {
        boolean ring();
    }

    Session(Nic nic, Endpoint endpoint, String caller, long key, ServerCallStreamObserver<SessionEvent> events, RingPort ringPort) {
        this.memoryFile = nic.kernel().memory().path();
        this.ringPort = ringPort;
        this.endpoint = endpoint;
        this.caller = caller;
        this.key = key;
        this.events = events;
        this.completions = nic.createCompletionQueue();
        endpoint.listenToQueuePairs((qpn, event) -> send(SessionEvent.newBuilder()
                .setQueuePairEvent(QueuePairEventRaised.newBuilder().setQpn(qpn).setKind(switch (event) {
                    case FATAL -> QueuePairEventRaised.Kind.FATAL;
                    case COMMUNICATION_ESTABLISHED -> QueuePairEventRaised.Kind.COMMUNICATION_ESTABLISHED;
                    case LAST_WQE_REACHED -> QueuePairEventRaised.Kind.LAST_WQE_REACHED;
                    case SEND_QUEUE_DRAINED -> QueuePairEventRaised.Kind.SEND_QUEUE_DRAINED;
                })).build()));
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
        SessionRings r = activeRings;
        if (r != null && RingCodec.writeCompletion(r.events(), c)) {
            ringIfAsleep(r);
            return;
        }
        pending.addCompletions(CompletionEvent.newBuilder()
                .setWrId(c.wrId())
                .setQpn(c.qpn())
                .setOpcodeValue(WireCodes.wireOpcode(c.opcode()))
                .setStatusValue(WireCodes.wireStatus(c.status()))
                .setBytes(c.bytes())
                .setValue(c.value())
                .setError(c.error() == null ? "" : StatusMapping.bounded(c.error()))
                .setHasImmediate(c.hasImmediate())
                .setImmediate(c.immediate())
                .setSolicited(c.solicited())
                .setInvalidated(c.invalidated())
                .setSourceQpn(c.source() == null ? 0 : c.source().qpn())
                .setSourceLid(c.source() == null ? 0 : c.source().lid())
                .setGlobalRoute(c.source() != null && c.source().globalRoute())
                .setTimeNs(System.nanoTime()));
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

    /** A posted work request or receive the node would not take: why ({@code status}'s code) and what to fix (its description). */
    synchronized void refused(int qpn, long wrId, Status status) {
        String error = StatusMapping.bounded(status.getDescription());
        int code = status.getCode().value();
        SessionRings r = activeRings;
        if (r != null && RingCodec.writeRefused(r.events(), qpn, wrId, code, error)) {
            ringIfAsleep(r);
            return;
        }
        flushCompletions(); // keep the order the application sees

        send(SessionEvent.newBuilder().setRefused(PostRefused.newBuilder().setQpn(qpn).setWrId(wrId).setCode(code).setError(error)).build());
    }

    /** A post refused for what {@code e} says (its status as {@link StatusMapping} gives it). */
    void refused(int qpn, long wrId, RuntimeException e) {
        refused(qpn, wrId, StatusMapping.toStatus(e).getStatus());
    }

    void watch(EventCounter counter) {
        LongConsumer handler = value -> counterChanged(counter.id(), value);
        if (watches.putIfAbsent(counter.id(), handler) == null) {
            counter.addHandler(handler);
            handler.accept(counter.value());
        }
    }

    private synchronized void counterChanged(int counterId, long value) {
        SessionRings r = activeRings;
        if (r != null && RingCodec.writeCounter(r.events(), counterId, value)) {
            ringIfAsleep(r);
        } else if (!events.isReady() || !unsentCounters.isEmpty()) {
            // The client is not reading: keep only each counter's latest value (peers may notify without
            // end, and the client wants the value, not every step), sent once it reads again.
            unsentCounters.put(counterId, value);
        } else {
            send(SessionEvent.newBuilder().setCounter(CounterChanged.newBuilder().setCounterId(counterId).setValue(value)).build());
        }
    }

    /** Counter values that changed while the client did not read its events, latest only. Guarded by this. */
    private final Map<Integer, Long> unsentCounters = new LinkedHashMap<>();

    /** The events stream can take more: send what waited for it. */
    synchronized void eventsWritable() {
        if (unsentCounters.isEmpty()) {
            return;
        }
        for (Map.Entry<Integer, Long> e : unsentCounters.entrySet()) {
            send(SessionEvent.newBuilder().setCounter(CounterChanged.newBuilder().setCounterId(e.getKey()).setValue(e.getValue())).build());
        }
        unsentCounters.clear();
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

    // ---- user-level access: rings in shared memory -------------------------------------------------

    /** Rings offered and not yet confirmed, then active; null when the session uses only its stream. */
    private SessionRings offeredRings;
    private volatile SessionRings activeRings;

    /** Creates the session's ring file and tells the application where it is. */
    synchronized void offerRings() {
        if (offeredRings != null || activeRings != null) {
            send(SessionEvent.newBuilder().setRingsOffered(RingsOffered.newBuilder().setRefusal("this session already has rings")).build());
            return;
        }
        try {
            offeredRings = ringPort.create(endpoint);
            send(SessionEvent.newBuilder().setRingsOffered(RingsOffered.newBuilder().setPath(offeredRings.path().toString())).build());
        } catch (RuntimeException e) {
            send(SessionEvent.newBuilder().setRingsOffered(RingsOffered.newBuilder().setRefusal(e.getMessage())).build());
        }
    }

    /**
     * The application mapped the rings and read the nonce (or failed): switch to them, or drop them.
     * Completions collected so far go out on the stream first, so none is overtaken.
     */
    synchronized void ringsAttached(RingsAttached attached) {
        SessionRings rings = offeredRings;
        offeredRings = null;
        if (rings == null) {
            return;
        }
        if (!attached.getFailure().isEmpty() || attached.getNonce() != rings.nonce() || endpointClosed) {
            ringPort.discard(rings);
            return;
        }
        flushCompletions();
        activeRings = rings;
        ringPort.activate(this);
        send(SessionEvent.newBuilder().setRingsActive(shareMemory(rings)).build());
    }

    /**
     * The application maps this session's rings, so it runs on the node's host as the node's user: it
     * may map the node's memory too and reach its pages directly, through its endpoint's CPU-visible
     * page table; received data over a word it sleeps on wakes it. Without a memory file (an
     * anonymous one) its store, load and waits stay calls.
     */
    private RingsActive shareMemory(SessionRings rings) {
        Path memory = memoryFile;
        if (memory == null) {
            return RingsActive.getDefaultInstance();
        }
        try {
            int slot = endpoint.space().shareWithCpu(RingPort.pageTableFor(rings));
            endpoint.watchPlacements(this::placed);
            return RingsActive.newBuilder().setMemoryPath(memory.toString())
                    .setPageTablePath(endpoint.space().cpuPageTable().toString()).setCpuSlot(slot).build();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.WARNING, "endpoint " + endpoint.id() + " cannot share its pages with its application; its store and"
                    + " load stay calls", e);
            return RingsActive.getDefaultInstance();
        }
    }

    /** Received data landed at [address, +length): a thread of the application sleeping on a word there is woken. */
    private void placed(long address, long length) {
        SessionRings r = activeRings;
        if (r == null) {
            return;
        }
        long watched = r.watchedAddress();
        if (watched != 0 && watched - address >= 0 && watched - address < length) {
            synchronized (this) {
                ringIfAsleep(r);
            }
        }
    }

    // ---- pages the application maps in its own page tables (the C verbs library) ---------------------

    /** Listens for reclaim's unmap requests once the application maps pages itself; null until then. */
    private MemoryListener cpuMappings;

    /** The application maps pages of its endpoint in its own page tables: tell it when reclaim wants one back. */
    synchronized void mapsCpuPages() {
        if (cpuMappings != null) {
            return;
        }
        cpuMappings = new MemoryListener() {
            @Override
            public void invalidate(AddressSpace space, long firstVpn, long pageCount, InvalidationReason reason) {
                // The application's mappings follow its own calls (deregistration, MADV_DONTNEED), not the NIC's translations.
            }

            @Override
            public void cpuUnmapWanted(AddressSpace space, long vpn) {
                askToUnmap(vpn << space.pageShift(), space.pageSize());
            }
        };
        endpoint.space().addListener(cpuMappings);
    }

    /**
     * Puts a CPU_UNMAP record on the event ring. The kernel asks with its lock held, so this never waits
     * for room: a full ring is tried again shortly from another thread. The application's ring reader
     * looks at the ring every few milliseconds; a sleeping one is rung.
     */
    private void askToUnmap(long address, long length) {
        SessionRings r = activeRings;
        if (r == null) {
            return;
        }
        if (RingCodec.tryWriteCpuUnmap(r.events(), address, length)) {
            if (r.takeAppAsleep()) {
                CompletableFuture.runAsync(this::wake);
            }
            return;
        }
        CompletableFuture.runAsync(() -> askToUnmap(address, length), CompletableFuture.delayedExecutor(1, TimeUnit.MILLISECONDS));
    }

    /** Rings the application's bell (it went to sleep); off the kernel's lock. */
    private void wake() {
        Bell b = bell;
        if (b == null || !b.ring()) {
            send(DOORBELL);
        }
    }

    /** The answer to a CPU fault from the ring: null when its pages are resident, else the call status saying why not. */
    synchronized void faultServed(long token, io.grpc.Status failure) {
        SessionRings r = activeRings;
        int code = failure == null ? 0 : failure.getCode().value();
        String error = failure == null ? null : StatusMapping.bounded(String.valueOf(failure.getDescription()));
        if (r != null && RingCodec.writeFaultServed(r.events(), token, code, error)) {
            ringIfAsleep(r);
        }
    }

    private static final SessionEvent DOORBELL = SessionEvent.newBuilder().setDoorbell(Doorbell.getDefaultInstance()).build();

    /** The application's ring agent sleeps: wake it (once; it clears the flag when it wakes), on its bell if it has one. */
    private void ringIfAsleep(SessionRings r) {
        if (r.takeAppAsleep()) {
            Bell b = bell;
            if (b == null || !b.ring()) {
                send(DOORBELL);
            }
        }
    }

    /** Sets the session's bell, once its application connected to it; null until then and after (wakes go on the stream). */
    void bell(Bell value) {
        bell = value;
    }

    /** The active rings, or null. */
    SessionRings rings() {
        return activeRings;
    }

    /** Runs {@code then} once the node has read the posts this session put on its rings before this call. */
    void afterPostsMadeBefore(Runnable then) {
        ringPort.afterPostsMadeBefore(this, then);
    }

    /** A wait on one of this session's counters began; if the session has ended already, it ends too. */
    void waiting(CounterWait wait) {
        counterWaits.add(wait);
        boolean closed;
        synchronized (this) {
            closed = endpointClosed;
        }
        if (closed) {
            wait.sessionEnded();
        }
    }

    /** A wait on one of this session's counters is over. */
    void waitEnded(CounterWait wait) {
        counterWaits.remove(wait);
    }

    /** Ends the session: the endpoint closes, releasing its queue pairs, pins and memory. */
    void close() {
        SessionRings rings;
        synchronized (this) {
            if (endpointClosed) {
                return;
            }
            endpointClosed = true;
            rings = activeRings != null ? activeRings : offeredRings;
            activeRings = null;
            offeredRings = null;
        }
        try {
            if (rings != null) {
                ringPort.discard(rings);
            }
            for (Map.Entry<Integer, LongConsumer> watch : watches.entrySet()) {
                EventCounter counter = endpoint.eventCounter(watch.getKey());
                if (counter != null) {
                    counter.removeHandler(watch.getValue());
                }
            }
            for (CounterWait wait : List.copyOf(counterWaits)) {
                wait.sessionEnded();
            }
        } finally {
            MemoryListener mappings;
            synchronized (this) {
                mappings = cpuMappings;
            }
            if (mappings != null) {
                endpoint.space().removeListener(mappings);
            }
            endpoint.close(); // whatever failed above, the session's pins, frames and queue pairs go
        }
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

    // ---- what the session's ids name ------------------------------------------------------------------

    /** The session's queue pair {@code qpn}, or NOT_FOUND. */
    QueuePair queuePair(int qpn) {
        for (QueuePair qp : endpoint.queuePairs()) {
            if (qp.qpn() == qpn) {
                return qp;
            }
        }
        throw Status.NOT_FOUND.withDescription("queue pair " + qpn + " does not exist on " + endpoint).asRuntimeException();
    }

    /** The session's region {@code lkey}, or NOT_FOUND. */
    MemoryRegion region(int lkey) {
        MemoryRegion region = endpoint.region(lkey);
        if (region == null) {
            throw Status.NOT_FOUND.withDescription("lkey " + lkey + " is not registered on " + endpoint).asRuntimeException();
        }
        return region;
    }

    /** The session's event counter {@code id}, or NOT_FOUND. */
    EventCounter counter(int id) {
        EventCounter counter = endpoint.eventCounter(id);
        if (counter == null) {
            throw Status.NOT_FOUND.withDescription("event counter " + id + " does not exist on " + endpoint).asRuntimeException();
        }
        return counter;
    }

    /** The session's shared receive queue {@code id}, or NOT_FOUND. */
    SharedReceiveQueue sharedReceiveQueue(int id) {
        SharedReceiveQueue srq = endpoint.sharedReceiveQueue(id);
        if (srq == null) {
            throw Status.NOT_FOUND.withDescription("shared receive queue " + id + " does not exist on " + endpoint).asRuntimeException();
        }
        return srq;
    }
}
