package io.pagewire.kernel;

/**
 * CLOCK (second chance): a hand sweeps the frames; a frame accessed since the hand last passed has
 * its accessed bit cleared and is spared, the first one not accessed is the victim.
 */
final class ClockReplacement implements PageReplacementPolicy {
    private int hand;

    @Override
    public int selectVictim(FrameTable frames) {
        int n = frames.frameCount();
        // Two sweeps: the first may only clear accessed bits.
        for (int step = 0; step < 2 * n; step++) {
            int frame = hand;
            hand = hand + 1 == n ? 0 : hand + 1;
            if (frames.isEvictable(frame) && !frames.testAndClearAccessed(frame)) {
                return frame;
            }
        }
        return -1;
    }
}
