package io.pagewire.node.nic;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * Posted receives in posting order: each arriving SEND (or WRITE_WITH_IMM) consumes the oldest. One
 * belongs to a queue pair, or is shared by several (a {@link SharedReceiveQueue}), which may arm a
 * low watermark that fires once when the posted count drops below it. Validated when posted, so the
 * responder only meets a buffer whose region became unusable since. Thread-safe: a shared one is
 * drawn from under different queue pairs' locks.
 */
final class ReceiveQueue {
    /** A posted receive, the region each of its elements lies in (null for a zero-length one), and its endpoint. */
    record Posted(ReceiveRequest request, MemoryRegion[] regions, Endpoint endpoint) {
    }

    private final ArrayDeque<Posted> posted = new ArrayDeque<>();
    private final int capacity;
    private int limit;
    private Runnable limitReached;

    ReceiveQueue(int capacity) {
        this.capacity = capacity;
    }

    /**
     * Checks a receive against its endpoint's regions and queues it.
     *
     * @throws NicException when the buffer is not a registered, locally writable range, or the queue is full
     */
    synchronized void post(Endpoint endpoint, ReceiveRequest request) {
        if (posted.size() >= capacity) {
            throw new QuotaExceededException("receive " + request.wrId() + ": the receive queue holds " + capacity
                    + " posted receives already (pagewire.nic.cqCapacity); reap completions first");
        }
        if (request.segments().size() > WorkRequestChecks.MAX_SEGMENTS) {
            throw new NicException("receive " + request.wrId() + ": " + request.segments().size() + " scatter elements; a receive takes at most "
                    + WorkRequestChecks.MAX_SEGMENTS);
        }
        MemoryRegion[] regions = new MemoryRegion[request.segments().size()];
        for (int i = 0; i < regions.length; i++) {
            Segment e = request.segments().get(i);
            if (e.length() < 0) {
                throw new NicException("receive " + request.wrId() + ": length must not be negative, was " + e.length());
            }
            if (e.length() == 0) {
                continue;
            }
            MemoryRegion region = endpoint.region(e.lkey());
            if (region == null) {
                throw new NicException("receive " + request.wrId() + ": lkey " + e.lkey() + " is not registered on " + endpoint);
            }
            if (region.invalidReason() != null) {
                throw new NicException("receive " + request.wrId() + ": " + region + " is no longer usable: " + region.invalidReason());
            }
            if (!region.allows(Access.LOCAL_WRITE)) {
                throw new NicException("receive " + request.wrId() + ": " + region + " lacks LOCAL_WRITE, so nothing can be received into it");
            }
            if (!region.covers(e.address(), e.length())) {
                throw new NicException(String.format("receive %d: buffer 0x%x+%d is outside %s", request.wrId(), e.address(), e.length(),
                        region));
            }
            regions[i] = region;
        }
        endpoint.admitWorkRequest(request.wrId());
        posted.add(new Posted(request, regions, endpoint));
    }

    /** The oldest posted receive, taken off the queue, or null when none is posted; may fire the armed limit. */
    Posted take() {
        Posted taken;
        Runnable fire = null;
        synchronized (this) {
            taken = posted.poll();
            if (taken != null && limit > 0 && posted.size() < limit) {
                fire = limitReached;
                limit = 0;
                limitReached = null;
            }
        }
        if (taken != null) {
            taken.endpoint().retireWorkRequests(1);
        }
        if (fire != null) {
            fire.run();
        }
        return taken;
    }

    /**
     * Puts a receive that was taken back at the head of the queue, counted as outstanding again: the
     * request that took it was refused before it used it.
     */
    synchronized void restore(Posted taken) {
        posted.addFirst(taken);
        taken.endpoint().recountWorkRequest();
    }

    synchronized int size() {
        return posted.size();
    }

    /**
     * Arms the low watermark: {@code reached} runs once, on the NIC thread that takes a receive, when
     * fewer than {@code limit} stay posted (ibverbs' {@code srq_limit} and IBV_EVENT_SRQ_LIMIT_REACHED).
     * Already below it, it runs at once. Zero disarms.
     */
    void arm(int newLimit, Runnable reached) {
        boolean now;
        synchronized (this) {
            now = newLimit > 0 && posted.size() < newLimit;
            limit = now ? 0 : newLimit;
            limitReached = now || newLimit == 0 ? null : reached;
        }
        if (now) {
            reached.run();
        }
    }

    /** Drops every posted receive, returning them (a shared queue destroyed, or its owner failed). */
    synchronized List<Posted> drain() {
        List<Posted> all = new ArrayList<>(posted);
        posted.clear();
        all.forEach(p -> p.endpoint().retireWorkRequests(1));
        return all;
    }
}
