package io.pagewire.client;

/** What a prefetch does, after {@code ibv_advise_mr}. */
public enum Advice {
    /** Fault pages in for reading and ready their translations. */
    PREFETCH,
    /** Fault pages in for writing. */
    PREFETCH_WRITE,
    /** Only ready translations of pages already resident. */
    PREFETCH_NO_FAULT
}
