package io.pagewire.client.impl;

import io.pagewire.client.PagewireException;
import java.io.IOException;
import java.nio.channels.ClosedSelectorException;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.ringbuffer.RingBuffer;

/**
 * The application's half of a session's rings: it writes posts on the request ring and drains the
 * event ring, handing each completion, refusal and counter change to the endpoint. A background agent
 * drains it, and sleeps when it stays empty until the node rings its doorbell; a thread that
 * busy-polls for a completion drains it itself, so in latency mode no thread hand-off stands between
 * the node and the waiting thread; while an application thread polls, the agent steps aside.
 */
final class RingClient implements AutoCloseable {
    /** What the events on the ring become. */
    interface Events {
        /** {@code opcode} and {@code status} are verbs.proto's numbers; {@code error} is null on success. */
        void completed(long wrId, int qpn, int opcode, int status, long bytes, long value, String error, boolean hasImmediate, int immediate);

        void refused(int qpn, long wrId, String error);

        void counterChanged(int counterId, long value);
    }

    private final SessionRings rings;
    private final Events events;
    private final Runnable doorbell;
    /** The node's doorbell to this agent and this agent's to the node, or null: the stream carries both. */
    private final RingBell bell;
    /** Where the agent sleeps when it has a bell; null without one (it parks). */
    private final Selector selector;
    private final ReentrantLock draining = new ReentrantLock();
    private final Thread agent;
    private final long spinNs;
    private volatile boolean closed;

    /** How long the agent naps between looks before it goes to sleep and wants a doorbell. */
    private static final long NAP_NS = 2_000_000L;

    /**
     * @param streamDoorbell wakes the node's ring agent with a message on the session stream
     * @param bell the session's {@link RingBell}, or null when there is none to reach
     */
    RingClient(SessionRings rings, Events events, Runnable streamDoorbell, boolean busyPoll, String name, RingBell bell) {
        this.rings = rings;
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
        if (selector != null) {
            selector.wakeup();
        }
    }


    /** Drains the event ring; when it stays empty, idles as {@link RingIdler} says. */
    private void run() {
        // With a bell a wake is cheap, so the agent sleeps soon instead of napping for milliseconds.
        RingIdler idler = bell == null ? new RingIdler(spinNs, NAP_NS) : RingIdler.withBells(spinNs);
        RingIdler.Agent self = new RingIdler.Agent() {
            @Override
            public void asleep(boolean value) {
                rings.appAsleep(value);
            }

            @Override
            public int poll() {
                return drain();
            }

            @Override
            public void sleep(long maxNs) {
                sleepOnBell(maxNs);
            }
        };
        try {
            while (!closed) {
                if (applicationPolls()) {
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
    /** When an application thread last polled; 0 before the first. */
    private volatile long applicationPolledNs;

    /** An application thread's look at the event ring (a busy-polling waiter): as {@link #drain}, and the agent steps aside meanwhile. */
    int poll() {
        applicationPolledNs = System.nanoTime();
        return drain();
    }

    /** Whether an application thread polls the ring now. */
    private boolean applicationPolls() {
        long at = applicationPolledNs;
        return at != 0 && System.nanoTime() - at < APPLICATION_POLLS_NS;
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
            case SessionRings.COMPLETION -> {
                int errorLength = b.getInt(at + 20);
                String error = errorLength > 0 ? b.getStringWithoutLengthUtf8(at + SessionRings.COMPLETION_FIXED_BYTES, errorLength) : null;
                events.completed(b.getLong(at), b.getInt(at + 8), b.getInt(at + 12), b.getInt(at + 16), b.getLong(at + 24),
                        b.getLong(at + 32), error, (b.getInt(at + 40) & SessionRings.HAS_IMMEDIATE_FLAG) != 0, b.getInt(at + 44));
            }
            case SessionRings.REFUSED -> events.refused(b.getInt(at + 8), b.getLong(at),
                    b.getStringWithoutLengthUtf8(at + SessionRings.REFUSED_FIXED_BYTES, b.getInt(at + 12)));
            case SessionRings.COUNTER -> events.counterChanged(b.getInt(at), b.getLong(at + 8));
            default -> {
                // A record type this version does not know: skip it.
            }
        }
    }

    /**
     * Writes one POST record; waits (spinning, then yielding) while the ring is full, up to the
     * deadline. A list too long for one record is split.
     */
    void post(int qpn, List<io.pagewire.client.WorkRequest> requests, long[] wrIds, long deadlineNs) {
        RingBuffer ring = rings.requests();
        int perRecord = (ring.maxMsgLength() - SessionRings.POST_HEADER_BYTES) / SessionRings.WORK_REQUEST_BYTES;
        for (int from = 0; from < requests.size(); from += perRecord) {
            int count = Math.min(perRecord, requests.size() - from);
            int length = SessionRings.POST_HEADER_BYTES + count * SessionRings.WORK_REQUEST_BYTES;
            int index = claim(ring, SessionRings.POST, length, deadlineNs);
            var b = ring.buffer();
            b.putInt(index, qpn);
            b.putInt(index + 4, count);
            int at = index + SessionRings.POST_HEADER_BYTES;
            for (int i = from; i < from + count; i++, at += SessionRings.WORK_REQUEST_BYTES) {
                io.pagewire.client.WorkRequest wr = requests.get(i);
                b.putLong(at, wrIds[i]);
                b.putInt(at + 8, WireOpcodes.toWire(wr.opcode()) | (wr.signaled() ? 0 : SessionRings.UNSIGNALED_FLAG));
                b.putInt(at + 12, wr.local() == null ? 0 : wr.local().lkey());
                b.putLong(at + 16, wr.localAddress());
                b.putInt(at + 24, wr.length());
                b.putInt(at + 28, wr.counterId());
                b.putLong(at + 32, wr.remoteAddress());
                b.putLong(at + 40, wr.rkey());
                b.putLong(at + 48, wr.add());
                b.putInt(at + 56, wr.immediate());
                b.putLong(at + 64, wr.swap());
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
        int index = claim(ring, SessionRings.POST_RECEIVE, SessionRings.POST_RECEIVE_HEADER_BYTES + SessionRings.RECEIVE_REQUEST_BYTES, deadlineNs);
        var b = ring.buffer();
        b.putInt(index, qpn);
        b.putInt(index + 4, srqId);
        b.putInt(index + 8, 1);
        int at = index + SessionRings.POST_RECEIVE_HEADER_BYTES;
        b.putLong(at, wrId);
        b.putInt(at + 8, lkey);
        b.putInt(at + 12, length);
        b.putLong(at + 16, address);
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
