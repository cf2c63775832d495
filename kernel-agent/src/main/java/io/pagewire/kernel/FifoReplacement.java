package io.pagewire.kernel;

/**
 * FIFO: a hand sweeps the frames and takes the next evictable one whatever its accessed bit. New
 * pages land in the frames the hand just freed, so the hand's order is the order pages came in.
 */
final class FifoReplacement implements PageReplacementPolicy {
    private int hand;

    @Override
    public int selectVictim(FrameTable frames) {
        int n = frames.frameCount();
        for (int step = 0; step < n; step++) {
            int frame = hand;
            hand = hand + 1 == n ? 0 : hand + 1;
            if (frames.isEvictable(frame)) {
                return frame;
            }
        }
        return -1;
    }
}
