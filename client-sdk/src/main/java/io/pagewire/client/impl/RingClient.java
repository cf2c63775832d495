package io.pagewire.client.impl;

import io.pagewire.client.PagewireException;
import io.pagewire.client.WorkRequest;
import io.pagewire.ring.CompletionRecord;
import io.pagewire.ring.CounterRecord;
import io.pagewire.ring.FaultRecord;
import io.pagewire.ring.FaultServedRecord;
import io.pagewire.ring.PostReceiveRecord;
import io.pagewire.ring.PostRecord;
import io.pagewire.ring.RefusedRecord;
import io.pagewire.ring.RingBell;
import io.pagewire.ring.RingIdler;
import io.pagewire.ring.SessionRings;
import java.io.IOException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.ringbuffer.RingBuffer;

/**
 * The application's half of a session's rings: it writes posts on the request ring and drains the
 * event ring, handing each completion, refusal and counter change to the endpoint. A background agent
 * drains it, and sleeps when it stays empty until the node rings its doorbell; a thread that
 * busy-polls for a completion drains it itself, so in latency mode no thread hand-off stands between
 * the node and the waiting thread; while an application thread polls, the agent steps aside. A thread
 * that blocks for an event does the agent's work meanwhile ({@link #await}): it drains the ring and
 * sleeps on the bell itself, as an ibverbs application blocks on its completion channel, so the
 * node's doorbell wakes the thread that waits instead of an agent that would then wake it.
 */
final class RingClient implements AutoCloseable {
    /** What the events on the ring become. */
    interface Events {
        /** {@code opcode} and {@code status} are verbs.proto's numbers; {@code error} is null on success. */
        void completed(long wrId, int qpn, int opcode, int status, long bytes, long value, String error, boolean hasImmediate, int immediate);

        /** {@code code} is the gRPC status code of the refusal. */
        void refused(int qpn, long wrId, int code, String error);

        void counterChanged(int counterId, long value);

        /** The node's answer to a CPU fault: {@code status} 0 when the pages are resident, else a gRPC status code. */
        void faultServed(long token, int status, String error);
    }

    private final SessionRings rings;
    private final Events events;
    private final Runnable doorbell;
    /** The node's doorbell to this agent and this agent's to the node, or null: the stream carries both. */
    private final RingBell bell;
    /** Where the agent sleeps when it has a bell; null without one (it parks). */
    private final Selector selector;
    private final ReentrantLock draining = new ReentrantLock();
    /**
     * Held by the one thread that sleeps on the bell (the agent, or a thread in {@link #await}), from
     * marking the application asleep in the ring headers until it is awake again: the selector is
     * used by one thread at a time, and only that thread says whether the node must ring.
     */
    private final ReentrantLock bellSleeper = new ReentrantLock();
    /** The thread blocked in {@link #await} that drains the ring and sleeps on the bell; null when none. */
    private final AtomicReference<Thread> waiter = new AtomicReference<>();
    /** Threads blocked in {@link #await} on their futures while another thread is the {@link #waiter}. */
    private final AtomicInteger followers = new AtomicInteger();
    /** Whether the agent is in the selector now (a waiter that arrives wakes it, and it steps aside). */
    private volatile boolean agentSelecting;
    private final Thread agent;
    private final long spinNs;
    private final long sleepLimitNs;
    private volatile boolean closed;

    /** How long the agent naps between looks before it goes to sleep and wants a doorbell. */
    private static final long NAP_NS = 2_000_000L;

    /**
     * @param streamDoorbell wakes the node's ring agent with a message on the session stream
     * @param sleepLimitNs the longest the agent sleeps without a doorbell
     * @param bell the session's {@link RingBell}, or null when there is none to reach
     */
    RingClient(SessionRings rings, Events events, Runnable streamDoorbell, boolean busyPoll, long sleepLimitNs, String name, RingBell bell) {
        this.rings = rings;
        this.sleepLimitNs = sleepLimitNs;
        this.events = events;
        Selector opened = null;
        if (bell != null) {
            try {
                opened = Selector.open();
                bell.channel().register(opened, SelectionKey.OP_READ);
            } catch (IOException e) {
                closeQuietly(opened);
                opened = null;
                bell.close(); // the node sees it go and rings on the stream instead
                bell = null;
            }
        }
        this.bell = bell;
        this.selector = opened;
        RingBell b = bell;
        this.doorbell = b == null ? streamDoorbell : () -> {
            if (!b.ring()) {
                streamDoorbell.run();
            }
        };
        // Busy-polling applications wait by draining the ring themselves; the agent is for handlers.
        this.spinNs = busyPoll ? 50_000 : 5_000;
        this.agent = new Thread(this::run, name);
        agent.setDaemon(true);
        agent.start();
    }

    /** The node rang on the stream (or the client closes): look at the event ring now. */
    void wake() {
        LockSupport.unpark(agent);
        Thread w = waiter.get();
        if (w != null) {
            LockSupport.unpark(w);
        }
        if (selector != null) {
            selector.wakeup();
        }
    }

    /** Drains the event ring; when it stays empty, idles as {@link RingIdler} says. */
    private void run() {
        // With a bell a wake is cheap, so the agent sleeps soon instead of napping for milliseconds.
        RingIdler idler = bell == null ? new RingIdler(spinNs, NAP_NS, sleepLimitNs) : RingIdler.withBells(spinNs, sleepLimitNs);
        RingIdler.Agent self = new BellSleeper() {
            @Override
            public void sleep(long maxNs) {
                if (!holdsBell || waiter.get() != null) {
                    // A waiting thread has the bell (or is about to): it drains the ring meanwhile.
                    LockSupport.parkNanos(this, Math.min(maxNs, APPLICATION_POLLS_NS));
                    return;
                }
                agentSelecting = true;
                try {
                    if (waiter.get() == null) {
                        sleepOnBell(maxNs);
                    }
                } finally {
                    agentSelecting = false;
                }
            }
        };
        try {
            while (!closed) {
                if (applicationDrains()) {
                    // Awake (the node rings no bell) but off the cores: the application's thread
                    // handles the events; the agent looks again when it stops.
                    LockSupport.parkNanos(this, APPLICATION_POLLS_NS);
                    idler.reset();
                } else if (drain() > 0) {
                    idler.reset();
                } else {
                    idler.idle(self);
                }
            }
        } finally {
            closeQuietly(selector);
        }
    }

    /**
     * A thread that drains the event ring and sleeps on the bell when it stays empty (the agent, or a
     * thread in {@link #await}). Only the holder of {@link #bellSleeper} marks the application asleep,
     * so {@link #asleep} takes the bell (true) or gives it back (false), and says so in {@link #holdsBell}.
     */
    private abstract class BellSleeper implements RingIdler.Agent {
        /** Whether this thread has the bell now: it marked the application asleep and may sleep on it. */
        boolean holdsBell;

        @Override
        public void asleep(boolean value) {
            if (value) {
                holdsBell = bellSleeper.tryLock();
                if (holdsBell) {
                    rings.appAsleep(true);
                }
            } else if (holdsBell) {
                holdsBell = false;
                rings.appAsleep(false);
                bellSleeper.unlock();
            }
        }

        @Override
        public int poll() {
            return drain();
        }
    }

    /**
     * Blocks the calling thread until {@code future} is done, the deadline passes ({@link #NO_DEADLINE}
     * for none) or the rings close,
     * doing the agent's work meanwhile: it drains the event ring (the events' handlers run on this
     * thread, as {@link #poll}'s do) and, when the ring stays empty, sleeps on the bell itself, as an
     * ibverbs application blocks in {@code ibv_get_cq_event} on its completion channel. The doorbell
     * then wakes the thread that waits, where it would wake the agent that wakes the waiter: one
     * thread hand-off fewer between the node and the application. The agent steps aside while a
     * thread waits so, and shortly after (a thread that waits again soon finds the bell free). One
     * thread at a time waits so; another, or a wait inside a handler (this thread drains already),
     * waits on its future, which whoever drains completes.
     */
    void await(CompletableFuture<?> future, long deadlineNs) {
        await(future::isDone, future, deadlineNs);
    }

    /**
     * As {@link #await(CompletableFuture, long)}, until {@code done} holds: a thread waiting on a word of
     * memory ({@link #watchAddress}), which data the node places over it wakes. {@code done} must be
     * cheap and must not wait on the rings itself.
     */
    void await(BooleanSupplier done, long deadlineNs) {
        await(done, null, deadlineNs);
    }

    private void await(BooleanSupplier done, CompletableFuture<?> future, long deadlineNs) {
        if (draining.isHeldByCurrentThread() || !waiter.compareAndSet(null, Thread.currentThread())) {
            followers.incrementAndGet();
            if (waiter.get() == null) {
                LockSupport.unpark(agent); // the waiter left meanwhile: the agent drains for this one
            }
            try {
                if (future != null) {
                    waitOnFuture(future, deadlineNs);
                } else {
                    while (!done.getAsBoolean() && !closed && remainingNs(deadlineNs) > 0) {
                        LockSupport.parkNanos(this, Math.min(remainingNs(deadlineNs), FOLLOWER_LOOK_NS));
                    }
                }
            } finally {
                followers.decrementAndGet();
            }
            return;
        }
        try {
            if (agentSelecting) {
                // It steps aside and gives the bell back.
                if (selector != null) {
                    selector.wakeup();
                }
                LockSupport.unpark(agent);
            }
            RingIdler idler = selector == null ? new RingIdler(spinNs, NAP_NS, sleepLimitNs) : RingIdler.withBells(spinNs, sleepLimitNs);
            WaitingAgent waiting = new WaitingAgent(done, future, deadlineNs);
            while (!done.getAsBoolean() && !closed && remainingNs(deadlineNs) > 0) {
                if (drain() > 0) {
                    idler.reset();
                } else if (!done.getAsBoolean()) {
                    idler.idle(waiting);
                }
            }
            if (waiting.interrupted) {
                Thread.currentThread().interrupt(); // as CompletableFuture.join leaves it: kept, not thrown
            }
        } finally {
            applicationPolledNs = System.nanoTime(); // it drained until now: the agent stays aside a moment more
            waiter.set(null);
            if (followers.get() > 0) {
                LockSupport.unpark(agent); // the followers' futures need a drainer again
            }
        }
    }

    /** What {@link #await}'s idler needs: the bell is taken in turn with the agent, and the future's completion ends a sleep. */
    private final class WaitingAgent extends BellSleeper {
        private final BooleanSupplier done;
        /** The future whose completion ends a sleep, or null (a wait on memory: the node's bell ends it). */
        private final CompletableFuture<?> future;
        private final long deadlineNs;
        private boolean wakeOnDone;
        /** The waiter was interrupted: a wait is not ended by that (as a join is not), but the status is given back. */
        private boolean interrupted;

        WaitingAgent(BooleanSupplier done, CompletableFuture<?> future, long deadlineNs) {
            this.done = done;
            this.future = future;
            this.deadlineNs = deadlineNs;
        }

        @Override
        public void sleep(long maxNs) {
            long remainingNs = remainingNs(deadlineNs);
            if (done.getAsBoolean() || remainingNs <= 0) {
                return;
            }
            if (!holdsBell) {
                // The agent still has the bell for a moment (it was woken to give it back).
                Thread.yield();
                return;
            }
            if (!wakeOnDone && future != null) {
                // Another thread may drain the event that settles the future (the agent, in the
                // moment before it stepped aside): its completion must end this sleep.
                wakeOnDone = true;
                future.whenComplete((value, error) -> wakeWaiter());
            }
            if (done.getAsBoolean()) {
                return;
            }
            // A set interrupt status would end every select and park at once: the wait would spin.
            interrupted |= Thread.interrupted();
            sleepOnBell(Math.min(maxNs, remainingNs));
        }
    }

    /** Ends the sleep of the thread in {@link #await}, if it sleeps. */
    private void wakeWaiter() {
        Thread w = waiter.get();
        if (w != null && w != Thread.currentThread()) {
            if (selector != null) {
                selector.wakeup();
            }
            LockSupport.unpark(w);
        }
    }

    /** How often a second thread waiting on memory looks at it while another thread has the bell. */
    private static final long FOLLOWER_LOOK_NS = 50_000L;

    /** The word an application thread sleeps on in {@link #await(BooleanSupplier, long)} (0: none), for the node to see. */
    void watchAddress(long address) {
        rings.watchAddress(address);
    }

    /** {@link #await}'s deadline when there is none. */
    static final long NO_DEADLINE = Long.MAX_VALUE;

    private static long remainingNs(long deadlineNs) {
        return deadlineNs == NO_DEADLINE ? Long.MAX_VALUE : deadlineNs - System.nanoTime();
    }

    /**
     * Waits until {@code future} is done, however, or the deadline ({@link #NO_DEADLINE} for none)
     * passes; the caller reads the outcome from the future. An interrupt does not end the wait (as it
     * does not end a join) but is kept for the caller.
     */
    static void waitOnFuture(CompletableFuture<?> future, long deadlineNs) {
        if (future.isDone()) {
            return;
        }
        Thread self = Thread.currentThread();
        future.whenComplete((value, error) -> LockSupport.unpark(self));
        boolean interrupted = false;
        long remainingNs;
        while (!future.isDone() && (remainingNs = remainingNs(deadlineNs)) > 0) {
            interrupted |= Thread.interrupted(); // a set status would end every park at once
            if (deadlineNs == NO_DEADLINE) {
                LockSupport.park(future);
            } else {
                LockSupport.parkNanos(future, remainingNs);
            }
        }
        if (interrupted) {
            self.interrupt();
        }
    }

    /**
     * Sleeps in the bell's selector until the node rings, {@link #wake} is called, or {@code maxNs}
     * pass. Without a selector (no bell), or when it fails or closes, it parks for the unpark of
     * {@link #wake}.
     */
    private void sleepOnBell(long maxNs) {
        if (selector == null) {
            LockSupport.parkNanos(maxNs);
            return;
        }
        try {
            selector.select(Math.max(1, maxNs / 1_000_000));
            selector.selectedKeys().clear();
            if (!bell.drain()) {
                // The node closed its end: stop watching it, or every select would return at once
                // and the agent would spin; wakes come on the stream from now on.
                SelectionKey key = bell.channel().keyFor(selector);
                if (key != null) {
                    key.cancel();
                }
            }
        } catch (IOException | ClosedSelectorException e) {
            LockSupport.parkNanos(selector, maxNs);
        }
    }

    private static void closeQuietly(Selector selector) {
        if (selector != null) {
            try {
                selector.close();
            } catch (IOException e) {
                // Nothing to do about a selector that will not close.
            }
        }
    }

    /**
     * An application thread polls the ring itself ({@link #poll}): the agent steps aside (it naps
     * instead of polling alongside, which on a small machine takes a core from the pollers that
     * matter) until that thread has not polled for this long.
     */
    private static final long APPLICATION_POLLS_NS = 1_000_000L;
    /** When an application thread last polled, or last left {@link #await}; 0 before the first. */
    private volatile long applicationPolledNs;

    /** An application thread's look at the event ring (a busy-polling waiter): as {@link #drain}, and the agent steps aside meanwhile. */
    int poll() {
        applicationPolledNs = System.nanoTime();
        return drain();
    }

    /**
     * Whether an application thread drains the ring now: one waits in {@link #await}, or one polled
     * or left {@link #await} a moment ago and no thread waits on its future for a drainer.
     */
    private boolean applicationDrains() {
        if (waiter.get() != null) {
            return true;
        }
        long at = applicationPolledNs;
        return at != 0 && followers.get() == 0 && System.nanoTime() - at < APPLICATION_POLLS_NS;
    }

    /** Handles what is on the event ring now; returns how many events (0 when another thread is draining). */
    int drain() {
        if (!draining.tryLock()) {
            return 0;
        }
        try {
            return rings.events().read(this::onEvent, 256);
        } finally {
            draining.unlock();
        }
    }

    private void onEvent(int type, DirectBuffer b, int at, int length) {
        switch (type) {
            case CompletionRecord.TYPE -> events.completed(CompletionRecord.wrId(b, at), CompletionRecord.qpn(b, at),
                    CompletionRecord.opcode(b, at), CompletionRecord.status(b, at), CompletionRecord.bytes(b, at),
                    CompletionRecord.value(b, at), CompletionRecord.error(b, at, length), CompletionRecord.hasImmediate(b, at),
                    CompletionRecord.immediate(b, at));
            case RefusedRecord.TYPE -> events.refused(RefusedRecord.qpn(b, at), RefusedRecord.wrId(b, at), RefusedRecord.status(b, at),
                    RefusedRecord.error(b, at, length));
            case CounterRecord.TYPE -> events.counterChanged(CounterRecord.counterId(b, at), CounterRecord.value(b, at));
            case FaultServedRecord.TYPE -> events.faultServed(FaultServedRecord.token(b, at), FaultServedRecord.status(b, at),
                    FaultServedRecord.error(b, at, length));
            default -> {
                // A record type this version does not know: skip it.
            }
        }
    }

    /**
     * Writes one POST record; waits (spinning, then yielding) while the ring is full, up to the
     * deadline. A list too long for one record is split.
     */
    void post(int qpn, List<WorkRequest> requests, long[] wrIds, long deadlineNs) {
        RingBuffer ring = rings.requests();
        int perRecord = PostRecord.capacity(ring.maxMsgLength());
        for (int from = 0; from < requests.size(); from += perRecord) {
            int count = Math.min(perRecord, requests.size() - from);
            int index = claim(ring, PostRecord.TYPE, PostRecord.length(count), deadlineNs);
            var b = ring.buffer();
            PostRecord.putHeader(b, index, qpn, count);
            for (int i = 0; i < count; i++) {
                WorkRequest wr = requests.get(from + i);
                int flags = (wr.signaled() ? 0 : PostRecord.UNSIGNALED_FLAG) | (wr.fence() ? PostRecord.FENCE_FLAG : 0)
                        | (wr.solicited() ? PostRecord.SOLICITED_FLAG : 0);
                PostRecord.putWorkRequestAt(b, PostRecord.workRequest(index, i), wrIds[from + i], WireOpcodes.toWire(wr.opcode()), flags,
                        wr.local() == null ? 0 : wr.local().lkey(), wr.localAddress(), wr.length(), wr.counterId(), wr.remoteAddress(), wr.rkey(),
                        wr.add(), wr.immediate(), wr.swap());
            }
            ring.commit(index);
        }
        if (rings.takeNodeAsleep()) {
            doorbell.run();
        }
    }

    /** Writes one POST_RECEIVE record (one receive, for a queue pair or, when srqId is set, a shared receive queue). */
    void postReceive(int qpn, int srqId, long wrId, int lkey, long address, int length, long deadlineNs) {
        RingBuffer ring = rings.requests();
        int index = claim(ring, PostReceiveRecord.TYPE, PostReceiveRecord.length(1), deadlineNs);
        var b = ring.buffer();
        PostReceiveRecord.putHeader(b, index, qpn, srqId, 1);
        PostReceiveRecord.putReceive(b, index, 0, wrId, lkey, address, length);
        ring.commit(index);
        if (rings.takeNodeAsleep()) {
            doorbell.run();
        }
    }

    /** Writes one FAULT record: a CPU of this application needs [address, address + length) resident. */
    void fault(long token, long address, int length, boolean write, long deadlineNs) {
        RingBuffer ring = rings.requests();
        int index = claim(ring, FaultRecord.TYPE, FaultRecord.LENGTH, deadlineNs);
        FaultRecord.put(ring.buffer(), index, token, address, length, write);
        ring.commit(index);
        if (rings.takeNodeAsleep()) {
            doorbell.run();
        }
    }

    /** Claims room for a record; waits (spinning, then yielding) while the ring is full, up to the deadline. */
    private int claim(RingBuffer ring, int type, int length, long deadlineNs) {
        int index;
        int attempts = 0;
        while ((index = ring.tryClaim(type, length)) <= 0) {
            if (closed) {
                throw new PagewireException.UnavailableException("the endpoint's rings are closed", null);
            }
            if (System.nanoTime() - deadlineNs > 0) {
                throw new PagewireException.UnavailableException("the node did not take posts from its ring within the deadline", null);
            }
            if (++attempts < 1000) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
        return index;
    }

    @Override
    public void close() {
        closed = true;
        wake();
        if (bell != null) {
            bell.close();
        }
    }
}
