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
     * The device swap emulates, by preset: {@code nvme}, {@code sata-ssd}, {@code hdd} or {@code ram}
     * (see {@link StorageModel}). A request waits out its access latency and transfer with the kernel
     * lock released, like the I/O itself. The four knobs below override single figures of it.
     */
    public static final String SWAP_DEVICE_PROP_NAME = "pagewire.kernel.swapDevice";
    public static final String SWAP_DEVICE_DEFAULT = "nvme";

    /** The swap device's read access latency; unset (-1) keeps the preset's. */
    public static final String SWAP_READ_LATENCY_PROP_NAME = "pagewire.kernel.swapReadLatencyNs";
    /** The swap device's write access latency; unset (-1) keeps the preset's. */
    public static final String SWAP_WRITE_LATENCY_PROP_NAME = "pagewire.kernel.swapWriteLatencyNs";
    /** The swap device's bandwidth in bytes per second, 0 for no limit; unset (-1) keeps the preset's. */
    public static final String SWAP_BANDWIDTH_PROP_NAME = "pagewire.kernel.swapBytesPerSecond";
    /** Requests the swap device serves at once, 0 for no limit; unset (-1) keeps the preset's. */
    public static final String SWAP_QUEUE_DEPTH_PROP_NAME = "pagewire.kernel.swapQueueDepth";
    public static final long SWAP_FIGURE_UNSET = -1;

    /**
     * The fault handler's own time per page fault, minor or major, on top of any swap I/O (a real
     * kernel's is a microsecond or two; an ODP NIC's round trip to its driver, tens). Waited with the
     * kernel lock released.
     */
    public static final String FAULT_OVERHEAD_PROP_NAME = "pagewire.kernel.faultOverheadNs";
    public static final long FAULT_OVERHEAD_DEFAULT_NS = 0;

    /**
     * How many page faults raised by NICs are served at once: the threads of the kernel's fault
     * service (a driver's page-fault work queue), each waiting on the swap device on its own.
     */
    public static final String FAULT_HANDLERS_PROP_NAME = "pagewire.kernel.faultHandlers";
    public static final int FAULT_HANDLERS_DEFAULT = 4;

    /**
     * The CPU time one page's pin costs, and one page's unpin: a real kernel's get_user_pages and the
     * NIC's or IOMMU's table update, about a microsecond a page in the kernel and tens of microseconds
     * for a small ibv_reg_mr with its system call. Spent busy, by the thread that pins, with the
     * kernel lock released; 0 (the default) makes a pin cost only its page-table update.
     */
    public static final String PIN_COST_PROP_NAME = "pagewire.kernel.pinCostNs";
    public static final long PIN_COST_DEFAULT_NS = 0;

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

    static StorageModel swapDevice() {
        return StorageModel.preset(SWAP_DEVICE_PROP_NAME, System.getProperty(SWAP_DEVICE_PROP_NAME, SWAP_DEVICE_DEFAULT));
    }

    static long swapFigure(String name) {
        return Long.getLong(name, SWAP_FIGURE_UNSET);
    }

    static long faultOverheadNs() {
        return Long.getLong(FAULT_OVERHEAD_PROP_NAME, FAULT_OVERHEAD_DEFAULT_NS);
    }

    static long pinCostNs() {
        return Long.getLong(PIN_COST_PROP_NAME, PIN_COST_DEFAULT_NS);
    }

    static int faultHandlers() {
        return Integer.getInteger(FAULT_HANDLERS_PROP_NAME, FAULT_HANDLERS_DEFAULT);
    }

    static long dmaDrainTimeoutNs() {
        return Long.getLong(DMA_DRAIN_TIMEOUT_PROP_NAME, DMA_DRAIN_TIMEOUT_DEFAULT_NS);
    }
}
