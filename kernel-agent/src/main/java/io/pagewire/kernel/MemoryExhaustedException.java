package io.pagewire.kernel;

/**
 * No frame could be found for a page: every frame is pinned, under DMA, or dirty with the swap
 * device full (the kernel's ENOMEM). The page that needed the frame is untouched, as is every other.
 */
public final class MemoryExhaustedException extends KernelException {
    private static final long serialVersionUID = 1L;

    public MemoryExhaustedException(String message) {
        super(message);
    }
}
