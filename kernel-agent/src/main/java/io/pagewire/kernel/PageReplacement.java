package io.pagewire.kernel;

/** The page replacement policies a node can be configured with. */
public enum PageReplacement {
    /** Second chance over frames: a frame whose accessed bit is set is spared once. */
    CLOCK,
    /** Round robin over frames, ignoring accessed bits: the baseline CLOCK is measured against. */
    FIFO;

    PageReplacementPolicy newPolicy() {
        return switch (this) {
            case CLOCK -> new ClockReplacement();
            case FIFO -> new FifoReplacement();
        };
    }
}
