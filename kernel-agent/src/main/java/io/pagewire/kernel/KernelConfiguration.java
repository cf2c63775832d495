package io.pagewire.kernel;

/**
 * Every knob of the kernel agent: a property name and its default, side by side. {@link KernelContext}
 * starts from these defaults (overridden by system properties of the same name) and validates.
 */
public final class KernelConfiguration {
    /** Size of a page and of a frame; a power of two. */
    public static final String PAGE_SIZE_PROP_NAME = "pagewire.kernel.pageSizeBytes";
    public static final int PAGE_SIZE_DEFAULT = 4096;

    /** Bytes of emulated physical memory (frames on the Java heap: size -Xmx for it); a multiple of the page size. */
    public static final String PHYSICAL_MEMORY_PROP_NAME = "pagewire.kernel.physicalMemoryBytes";
    public static final long PHYSICAL_MEMORY_DEFAULT = 256L * 1024 * 1024;

    /** Bytes of the swap device; 0 means no swap. */
    public static final String SWAP_SIZE_PROP_NAME = "pagewire.kernel.swapBytes";
    public static final long SWAP_SIZE_DEFAULT = 1024L * 1024 * 1024;

    /** File that backs the swap device; empty means a temporary file deleted when the agent closes. */
    public static final String SWAP_FILE_PROP_NAME = "pagewire.kernel.swapFile";
    public static final String SWAP_FILE_DEFAULT = "";

    /** Bytes one address space may have pinned, like {@code RLIMIT_MEMLOCK}. */
    public static final String MEMLOCK_LIMIT_PROP_NAME = "pagewire.kernel.memlockLimitBytes";
    public static final long MEMLOCK_LIMIT_DEFAULT = 64L * 1024 * 1024;

    /** Bytes the whole node may have pinned; 0 means three quarters of physical memory. */
    public static final String NODE_PIN_LIMIT_PROP_NAME = "pagewire.kernel.nodePinLimitBytes";
    public static final long NODE_PIN_LIMIT_DEFAULT = 0;

    /** Bytes of the NetVM system buffer that parks data for non-resident pages; a multiple of the page size. */
    public static final String SYSTEM_BUFFER_SIZE_PROP_NAME = "pagewire.kernel.systemBufferBytes";
    public static final long SYSTEM_BUFFER_SIZE_DEFAULT = 1024L * 1024;

    /** Which page replacement policy chooses victim frames. */
    public static final String PAGE_REPLACEMENT_PROP_NAME = "pagewire.kernel.pageReplacement";
    public static final PageReplacement PAGE_REPLACEMENT_DEFAULT = PageReplacement.CLOCK;

    /** How long freeing memory waits for in-flight DMA on its pages to drain before it gives up. */
    public static final String DMA_DRAIN_TIMEOUT_PROP_NAME = "pagewire.kernel.dmaDrainTimeoutNs";
    public static final long DMA_DRAIN_TIMEOUT_DEFAULT_NS = 10_000_000_000L;

    /**
     * Time one swap read or write takes on top of the swap file's own (a device's access latency).
     * The kernel waits it out with its lock released, like the I/O itself.
     */
    public static final String SWAP_ACCESS_LATENCY_PROP_NAME = "pagewire.kernel.swapAccessLatencyNs";
    public static final long SWAP_ACCESS_LATENCY_DEFAULT_NS = 0;

    private KernelConfiguration() {
    }

    static int pageSizeBytes() {
        return Integer.getInteger(PAGE_SIZE_PROP_NAME, PAGE_SIZE_DEFAULT);
    }

    static long physicalMemoryBytes() {
        return Long.getLong(PHYSICAL_MEMORY_PROP_NAME, PHYSICAL_MEMORY_DEFAULT);
    }

    static long swapBytes() {
        return Long.getLong(SWAP_SIZE_PROP_NAME, SWAP_SIZE_DEFAULT);
    }

    static String swapFile() {
        return System.getProperty(SWAP_FILE_PROP_NAME, SWAP_FILE_DEFAULT);
    }

    static long memlockLimitBytes() {
        return Long.getLong(MEMLOCK_LIMIT_PROP_NAME, MEMLOCK_LIMIT_DEFAULT);
    }

    static long nodePinLimitBytes() {
        return Long.getLong(NODE_PIN_LIMIT_PROP_NAME, NODE_PIN_LIMIT_DEFAULT);
    }

    static long systemBufferBytes() {
        return Long.getLong(SYSTEM_BUFFER_SIZE_PROP_NAME, SYSTEM_BUFFER_SIZE_DEFAULT);
    }

    static PageReplacement pageReplacement() {
        String value = System.getProperty(PAGE_REPLACEMENT_PROP_NAME);
        return value == null ? PAGE_REPLACEMENT_DEFAULT : PageReplacement.parse(PAGE_REPLACEMENT_PROP_NAME, value);
    }

    static long swapAccessLatencyNs() {
        return Long.getLong(SWAP_ACCESS_LATENCY_PROP_NAME, SWAP_ACCESS_LATENCY_DEFAULT_NS);
    }

    static long dmaDrainTimeoutNs() {
        return Long.getLong(DMA_DRAIN_TIMEOUT_PROP_NAME, DMA_DRAIN_TIMEOUT_DEFAULT_NS);
    }
}
