package io.pagewire.kernel;

/** Why the kernel takes pages away from whoever holds translations for them. */
public enum InvalidationReason {
    /** Page replacement is taking the frame; the page stays allocated and can be faulted back in. */
    EVICTION,
    /** The pages are being freed; every pin on them is revoked once the listeners return. */
    UNMAP
}
