package io.pagewire.kernel;

/** How a page fault was served. */
public enum FaultKind {
    /** No I/O: the frame was still present, or a never-written page was zero-filled. */
    MINOR,
    /** The page was read back from swap. */
    MAJOR
}
