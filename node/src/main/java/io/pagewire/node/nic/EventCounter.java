package io.pagewire.node.nic;

import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;

/**
 * A NetVM event counter on an endpoint: WRITE_WITH_NOTIFY adds one once the write's data is visible,
 * FETCH_ADD adds any value. A waiter polls {@link #value()}, blocks in {@link #await}, or registers a
 * handler that is called with each new value.
 */
public final class EventCounter {
    private static final System.Logger LOG = System.getLogger(EventCounter.class.getName());

    private final int id;
    private final Endpoint endpoint;
    private final int accessMask;
    private final List<LongConsumer> handlers = new CopyOnWriteArrayList<>();
    private long value;
    private int waiters;

    EventCounter(int id, Endpoint endpoint, Set<Access> access) {
        this.id = id;
        this.endpoint = endpoint;
        this.accessMask = Access.mask(access);
    }

    public int id() {
        return id;
    }

    public Endpoint endpoint() {
        return endpoint;
    }

    boolean allows(Access right) {
        return right.in(accessMask);
    }

    public synchronized long value() {
        return value;
    }

    /** Adds to the counter and returns the value before, waking waiters and calling handlers. */
    public long getAndAdd(long delta) {
        long previous;
        long now;
        synchronized (this) {
            previous = value;
            value += delta;
            now = value;
            if (waiters > 0) {
                notifyAll();
            }
        }
        for (LongConsumer handler : handlers) {
            try {
                handler.accept(now);
            } catch (RuntimeException e) {
                // The change stands (its data landed and is acknowledged); a failing handler changes
                // nothing for the NIC, which must not take the packet for dropped and apply it again.
                LOG.log(System.Logger.Level.WARNING, "a handler of event counter " + id + " on " + endpoint + " failed at value " + now, e);
            }
        }
        return previous;
    }

    /**
     * Blocks until the counter reaches {@code target} or the timeout passes.
     *
     * @return the counter's value when the wait ended
     */
    public long await(long target, long timeout, TimeUnit unit) throws InterruptedException {
        long deadline = System.nanoTime() + unit.toNanos(timeout);
        synchronized (this) {
            waiters++;
            try {
                while (value < target) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        break;
                    }
                    TimeUnit.NANOSECONDS.timedWait(this, left);
                }
                return value;
            } finally {
                waiters--;
            }
        }
    }

    /** Calls the handler with the counter's new value after every change, on the thread that changed it. */
    public void addHandler(LongConsumer handler) {
        handlers.add(handler);
    }

    public void removeHandler(LongConsumer handler) {
        handlers.remove(handler);
    }

    /** Handlers registered now (sessions' watches, waits in progress). */
    public int handlerCount() {
        return handlers.size();
    }
}
