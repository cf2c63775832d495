package io.pagewire.node.nic;

import java.util.List;

/**
 * A receive buffer posted to a queue pair, after {@code ibv_recv_wr}: the next SEND that arrives fills
 * its scatter list {@code segments} in order ({@code length} is their sum), and its completion carries
 * {@code wrId}. A receive with no elements takes only a zero-length message.
 */
public record ReceiveRequest(long wrId, List<Segment> segments, int length) {
    public ReceiveRequest {
        segments = List.copyOf(segments);
        long sum = 0;
        for (Segment s : segments) {
            sum += s.length();
        }
        if (sum != length) {
            throw new NicException("receive " + wrId + ": its length " + length + " is not the sum of its scatter elements' (" + sum + ")");
        }
    }

    /** One buffer, [address, +length) of the region named by {@code lkey}. */
    public ReceiveRequest(long wrId, int lkey, long address, int length) {
        this(wrId, List.of(new Segment(lkey, address, length)), length);
    }

    /** A receive scattering into {@code segments}, or a NicException when they add up to more than a message holds. */
    public static ReceiveRequest scatter(long wrId, List<Segment> segments) {
        return new ReceiveRequest(wrId, segments, WorkRequest.lengthOf(wrId, segments));
    }

    /** The first element's address, or 0 when there is none. */
    public long address() {
        return segments.isEmpty() ? 0 : segments.get(0).address();
    }
}
