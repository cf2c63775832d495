package io.pagewire.node.nic;

import java.util.ArrayDeque;

/**
 * The receives posted to a queue pair, in posting order: each arriving SEND (or WRITE_WITH_IMM)
 * consumes the oldest. Validated when posted, so the responder only meets a buffer whose region
 * became unusable since. Guarded by the queue pair's lock.
 */
final class ReceiveQueue {
    /** A posted receive and the region its buffer lies in. */
    record Posted(ReceiveRequest request, MemoryRegion region) {
    }

    private final ArrayDeque<Posted> posted = new ArrayDeque<>();
    private final int capacity;

    ReceiveQueue(int capacity) {
        this.capacity = capacity;
    }

    /**
     * Checks a receive against its endpoint's regions and queues it.
     *
     * @throws NicException when the buffer is not a registered, locally writable range, or the queue is full
     */
    void post(Endpoint endpoint, ReceiveRequest request) {
        if (posted.size() >= capacity) {
            throw new NicException("receive " + request.wrId() + ": the receive queue holds " + capacity
                    + " posted receives already (pagewire.nic.cqCapacity); reap completions first");
        }
        if (request.length() < 0) {
            throw new NicException("receive " + request.wrId() + ": length must not be negative, was " + request.length());
        }
        MemoryRegion region = endpoint.region(request.lkey());
        if (region == null) {
            throw new NicException("receive " + request.wrId() + ": lkey " + request.lkey() + " is not registered on " + endpoint);
        }
        if (region.invalidReason() != null) {
            throw new NicException("receive " + request.wrId() + ": " + region + " is no longer usable: " + region.invalidReason());
        }
        if (!region.allows(Access.LOCAL_WRITE)) {
            throw new NicException("receive " + request.wrId() + ": " + region + " lacks LOCAL_WRITE, so nothing can be received into it");
        }
        if (!region.covers(request.address(), request.length())) {
            throw new NicException(String.format("receive %d: buffer 0x%x+%d is outside %s", request.wrId(), request.address(),
                    request.length(), region));
        }
        posted.add(new Posted(request, region));
    }

    /** The oldest posted receive, taken off the queue, or null when none is posted. */
    Posted take() {
        return posted.poll();
    }

    int size() {
        return posted.size();
    }
}
