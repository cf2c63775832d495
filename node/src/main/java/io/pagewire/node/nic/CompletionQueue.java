package io.pagewire.node.nic;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Where queue pairs report finished work requests, in order per queue pair. A consumer polls, waits,
 * or sets a handler that receives each completion as it happens (on the NIC's thread, so it must not
 * block). Its capacity is a bound, not an allocation: an idle queue costs almost nothing, whatever
 * {@code pagewire.nic.cqCapacity} says.
 */
public final class CompletionQueue {
    private static final System.Logger LOG = System.getLogger(CompletionQueue.class.getName());

    private final int id;
    private final LinkedBlockingQueue<Completion> queue;
    private volatile Handler handler;
    private boolean pushedSinceFlush;

    CompletionQueue(int id, int capacity) {
        this.id = id;
        this.queue = new LinkedBlockingQueue<>(capacity);
    }

    public int id() {
        return id;
    }

    /**
     * Receives completions as they happen instead of a queue. {@link #completed} is called for each,
     * then {@link #flush} once the NIC finished the work that produced them, so a handler can pass a
     * burst on together. Both run on the NIC's threads and must not block.
     */
    public interface Handler {
        void completed(Completion completion);

        default void flush() {
        }
    }

    /** Delivers completions to a handler from now on instead of queueing them; queued ones are handed over first. */
    public synchronized void setHandler(Handler value) {
        if (value != null) {
            Completion queued;
            while ((queued = queue.poll()) != null) {
                deliver(value, queued);
            }
            flush(value);
        }
        handler = value;
    }

    /** @return false when the queue is full (the queue pair then fails) */
    boolean push(Completion completion) {
        if (handler != null) {
            synchronized (this) {
                Handler h = handler;
                if (h != null) {
                    deliver(h, completion);
                    pushedSinceFlush = true;
                    return true;
                }
            }
        }
        return queue.offer(completion);
    }

    /** The NIC finished a piece of work: the handler may pass on what it collected. */
    void flush() {
        if (handler != null) {
            synchronized (this) {
                if (pushedSinceFlush && handler != null) {
                    pushedSinceFlush = false;
                    flush(handler);
                }
            }
        }
    }

    /** Hands a completion to the handler; a handler that throws is logged (the NIC is past this completion already). */
    private void deliver(Handler h, Completion completion) {
        try {
            h.completed(completion);
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.ERROR, "the handler of completion queue " + id + " failed on " + completion, e);
        }
    }

    private void flush(Handler h) {
        try {
            h.flush();
        } catch (RuntimeException e) {
            LOG.log(System.Logger.Level.ERROR, "the handler of completion queue " + id + " failed to flush", e);
        }
    }

    /** The oldest completion, or null. */
    public Completion poll() {
        return queue.poll();
    }

    /** Up to {@code max} completions, oldest first. */
    public List<Completion> poll(int max) {
        List<Completion> out = new ArrayList<>(Math.min(max, 64));
        queue.drainTo(out, max);
        return out;
    }

    /** Waits up to the timeout for a completion; null if none came. */
    public Completion take(long timeout, TimeUnit unit) throws InterruptedException {
        return queue.poll(timeout, unit);
    }

    public int size() {
        return queue.size();
    }
}
