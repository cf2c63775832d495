package io.pagewire.node.nic;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Where queue pairs report finished work requests, in order per queue pair. A consumer polls, waits,
 * or sets a handler that receives each completion as it happens (on the NIC's thread, so it must not
 * block).
 */
public final class CompletionQueue {
    private final int id;
    private final ArrayBlockingQueue<Completion> queue;
    private volatile Consumer<Completion> handler;

    CompletionQueue(int id, int capacity) {
        this.id = id;
        this.queue = new ArrayBlockingQueue<>(capacity);
    }

    public int id() {
        return id;
    }

    /** Delivers completions to a handler from now on instead of queueing them; queued ones are handed over first. */
    public synchronized void setHandler(Consumer<Completion> value) {
        if (value != null) {
            Completion queued;
            while ((queued = queue.poll()) != null) {
                value.accept(queued);
            }
        }
        handler = value;
    }

    /** @return false when the queue is full (the queue pair then fails) */
    boolean push(Completion completion) {
        Consumer<Completion> h = handler;
        if (h != null) {
            synchronized (this) {
                h = handler;
                if (h != null) {
                    h.accept(completion);
                    return true;
                }
            }
        }
        return queue.offer(completion);
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
