package io.pagewire.kernel;

import java.nio.file.Path;

/**
 * The settings one kernel agent runs with: defaults from {@link KernelConfiguration}, fluent setters,
 * and one {@link #conclude()} that rejects a bad value with a message naming its knob.
 */
public final class KernelContext {
    /** The largest page a node may have: a 2 MiB huge page. */
    public static final int MAX_PAGE_SIZE = 2 << 20;

    private int pageSizeBytes = KernelConfiguration.pageSizeBytes();
    private long physicalMemoryBytes = KernelConfiguration.physicalMemoryBytes();
    private long swapBytes = KernelConfiguration.swapBytes();
    private Path swapFile = KernelConfiguration.swapFile().isEmpty() ? null : Path.of(KernelConfiguration.swapFile());
    private long memlockLimitBytes = KernelConfiguration.memlockLimitBytes();
    private long nodePinLimitBytes = KernelConfiguration.nodePinLimitBytes();
    private long systemBufferBytes = KernelConfiguration.systemBufferBytes();
    private PageReplacement pageReplacement = KernelConfiguration.pageReplacement();
    private long dmaDrainTimeoutNs = KernelConfiguration.dmaDrainTimeoutNs();
    private StorageModel swapDevice = KernelConfiguration.swapDevice();
    private long swapReadLatencyNs = KernelConfiguration.swapFigure(KernelConfiguration.SWAP_READ_LATENCY_PROP_NAME);
    private long swapWriteLatencyNs = KernelConfiguration.swapFigure(KernelConfiguration.SWAP_WRITE_LATENCY_PROP_NAME);
    private long swapBytesPerSecond = KernelConfiguration.swapFigure(KernelConfiguration.SWAP_BANDWIDTH_PROP_NAME);
    private long swapQueueDepth = KernelConfiguration.swapFigure(KernelConfiguration.SWAP_QUEUE_DEPTH_PROP_NAME);
    private long faultOverheadNs = KernelConfiguration.faultOverheadNs();
    private int faultHandlers = KernelConfiguration.faultHandlers();
    private long pinCostNs = KernelConfiguration.pinCostNs();
    private NanoClock clock = NanoClock.SYSTEM;
    private String name = "kernel";
    private boolean concluded;

    public KernelContext pageSizeBytes(int value) {
        pageSizeBytes = value;
        return this;
    }

    public KernelContext physicalMemoryBytes(long value) {
        physicalMemoryBytes = value;
        return this;
    }

    public KernelContext swapBytes(long value) {
        swapBytes = value;
        return this;
    }

    /** The file backing swap; {@code null} for a temporary file removed at close. */
    public KernelContext swapFile(Path value) {
        swapFile = value;
        return this;
    }

    public KernelContext memlockLimitBytes(long value) {
        memlockLimitBytes = value;
        return this;
    }

    /** The node-wide pin limit; 0 for three quarters of physical memory. */
    public KernelContext nodePinLimitBytes(long value) {
        nodePinLimitBytes = value;
        return this;
    }

    public KernelContext systemBufferBytes(long value) {
        systemBufferBytes = value;
        return this;
    }

    public KernelContext pageReplacement(PageReplacement value) {
        pageReplacement = value;
        return this;
    }

    public KernelContext dmaDrainTimeoutNs(long value) {
        dmaDrainTimeoutNs = value;
        return this;
    }

    /**
     * How long swap takes: a preset of {@link StorageModel} or figures of one's own. The single
     * figures set below override it, whichever is set first.
     */
    public KernelContext swapDevice(StorageModel value) {
        swapDevice = value;
        return this;
    }

    /** The swap device's read latency instead of its model's; -1 keeps the model's. */
    public KernelContext swapReadLatencyNs(long value) {
        swapReadLatencyNs = value;
        return this;
    }

    /** The swap device's write latency instead of its model's; -1 keeps the model's. */
    public KernelContext swapWriteLatencyNs(long value) {
        swapWriteLatencyNs = value;
        return this;
    }

    /** The swap device's bandwidth instead of its model's (0: no limit); -1 keeps the model's. */
    public KernelContext swapBytesPerSecond(long value) {
        swapBytesPerSecond = value;
        return this;
    }

    /** The swap device's queue depth instead of its model's (0: no limit); -1 keeps the model's. */
    public KernelContext swapQueueDepth(long value) {
        swapQueueDepth = value;
        return this;
    }

    /** The fault handler's own time per fault, minor or major. */
    public KernelContext faultOverheadNs(long value) {
        faultOverheadNs = value;
        return this;
    }

    /** The CPU time a page's pin costs, and its unpin (0: only the page-table update). */
    public KernelContext pinCostNs(long value) {
        pinCostNs = value;
        return this;
    }

    /** How many NIC page faults are served at once (the fault service's threads). */
    public KernelContext faultHandlers(int value) {
        faultHandlers = value;
        return this;
    }

    public KernelContext clock(NanoClock value) {
        clock = value;
        return this;
    }

    /** A label for threads and logs, e.g. the node's id. */
    public KernelContext name(String value) {
        name = value;
        return this;
    }

    public int pageSizeBytes() {
        return pageSizeBytes;
    }

    public int pageShift() {
        return Integer.numberOfTrailingZeros(pageSizeBytes);
    }

    public long physicalMemoryBytes() {
        return physicalMemoryBytes;
    }

    public int frameCount() {
        return (int) (physicalMemoryBytes / pageSizeBytes);
    }

    public long swapBytes() {
        return swapBytes;
    }

    public Path swapFile() {
        return swapFile;
    }

    public long memlockLimitBytes() {
        return memlockLimitBytes;
    }

    public long nodePinLimitBytes() {
        return nodePinLimitBytes;
    }

    public long systemBufferBytes() {
        return systemBufferBytes;
    }

    public PageReplacement pageReplacement() {
        return pageReplacement;
    }

    public long dmaDrainTimeoutNs() {
        return dmaDrainTimeoutNs;
    }

    /** The swap device's model with the single figures set applied. */
    public StorageModel swapDevice() {
        return new StorageModel(overridden(swapReadLatencyNs, swapDevice.readLatencyNs()),
                overridden(swapWriteLatencyNs, swapDevice.writeLatencyNs()),
                overridden(swapBytesPerSecond, swapDevice.bytesPerSecond()),
                (int) overridden(swapQueueDepth, swapDevice.queueDepth()));
    }

    private static long overridden(long figure, long model) {
        return figure == KernelConfiguration.SWAP_FIGURE_UNSET ? model : figure;
    }

    public long faultOverheadNs() {
        return faultOverheadNs;
    }

    public int faultHandlers() {
        return faultHandlers;
    }

    public long pinCostNs() {
        return pinCostNs;
    }

    public NanoClock clock() {
        return clock;
    }

    public String name() {
        return name;
    }

    /**
     * Validates every knob and resolves derived defaults; idempotent.
     *
     * @throws IllegalArgumentException naming the first knob whose value is unusable
     */
    public KernelContext conclude() {
        if (concluded) {
            return this;
        }
        if (pageSizeBytes < 512 || pageSizeBytes > MAX_PAGE_SIZE || Integer.bitCount(pageSizeBytes) != 1) {
            throw invalid(KernelConfiguration.PAGE_SIZE_PROP_NAME, "a power of two from 512 to " + MAX_PAGE_SIZE + " (2 MiB, a huge page)",
                    pageSizeBytes);
        }
        if (physicalMemoryBytes % pageSizeBytes != 0 || physicalMemoryBytes / pageSizeBytes < 16
                || physicalMemoryBytes / pageSizeBytes > Integer.MAX_VALUE / 2) {
            throw invalid(KernelConfiguration.PHYSICAL_MEMORY_PROP_NAME,
                    "a multiple of the page size (" + pageSizeBytes + ") holding at least 16 frames", physicalMemoryBytes);
        }
        if (swapBytes < 0 || swapBytes % pageSizeBytes != 0 || swapBytes / pageSizeBytes > Integer.MAX_VALUE / 2) {
            throw invalid(KernelConfiguration.SWAP_SIZE_PROP_NAME, "a non-negative multiple of the page size (" + pageSizeBytes + ")", swapBytes);
        }
        if (memlockLimitBytes < 0) {
            throw invalid(KernelConfiguration.MEMLOCK_LIMIT_PROP_NAME, "non-negative", memlockLimitBytes);
        }
        if (nodePinLimitBytes == 0) {
            nodePinLimitBytes = physicalMemoryBytes / 4 * 3;
        }
        if (nodePinLimitBytes < 0 || nodePinLimitBytes > physicalMemoryBytes) {
            throw invalid(KernelConfiguration.NODE_PIN_LIMIT_PROP_NAME,
                    "between 1 and the physical memory (" + physicalMemoryBytes + "), or 0 for the default", nodePinLimitBytes);
        }
        int slot = SystemBuffer.slotBytes(pageSizeBytes);
        if (systemBufferBytes < slot || systemBufferBytes % slot != 0 || systemBufferBytes > Integer.MAX_VALUE) {
            throw invalid(KernelConfiguration.SYSTEM_BUFFER_SIZE_PROP_NAME, "a multiple of its slot size (" + slot
                    + ": the page size, at most 64 KiB), at least one slot and under 2 GiB", systemBufferBytes);
        }
        if (pageReplacement == null) {
            throw invalid(KernelConfiguration.PAGE_REPLACEMENT_PROP_NAME, "set", "null");
        }
        if (dmaDrainTimeoutNs <= 0) {
            throw invalid(KernelConfiguration.DMA_DRAIN_TIMEOUT_PROP_NAME, "positive", dmaDrainTimeoutNs);
        }
        if (swapDevice == null) {
            throw invalid(KernelConfiguration.SWAP_DEVICE_PROP_NAME, "set", "null");
        }
        requireFigure(KernelConfiguration.SWAP_READ_LATENCY_PROP_NAME, swapReadLatencyNs, Long.MAX_VALUE);
        requireFigure(KernelConfiguration.SWAP_WRITE_LATENCY_PROP_NAME, swapWriteLatencyNs, Long.MAX_VALUE);
        requireFigure(KernelConfiguration.SWAP_BANDWIDTH_PROP_NAME, swapBytesPerSecond, Long.MAX_VALUE);
        requireFigure(KernelConfiguration.SWAP_QUEUE_DEPTH_PROP_NAME, swapQueueDepth, Integer.MAX_VALUE);
        if (faultOverheadNs < 0) {
            throw invalid(KernelConfiguration.FAULT_OVERHEAD_PROP_NAME, "zero or positive", faultOverheadNs);
        }
        if (pinCostNs < 0 || pinCostNs > 1_000_000_000L) {
            throw invalid(KernelConfiguration.PIN_COST_PROP_NAME, "0 to 1 s", pinCostNs);
        }
        if (faultHandlers < 1 || faultHandlers > 256) {
            throw invalid(KernelConfiguration.FAULT_HANDLERS_PROP_NAME, "1 to 256", faultHandlers);
        }
        if (clock == null) {
            throw new IllegalArgumentException("clock must be set");
        }
        concluded = true;
        return this;
    }

    private static void requireFigure(String knob, long value, long max) {
        if (value < KernelConfiguration.SWAP_FIGURE_UNSET || value > max) {
            throw invalid(knob, "zero or positive (up to " + max + "), or -1 for the device preset's", value);
        }
    }

    private static IllegalArgumentException invalid(String knob, String expected, Object actual) {
        return new IllegalArgumentException(knob + " must be " + expected + ", was " + actual);
    }
}
