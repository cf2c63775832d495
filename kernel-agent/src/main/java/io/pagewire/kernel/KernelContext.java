package io.pagewire.kernel;

import static io.pagewire.kernel.KernelConfiguration.DMA_DRAIN_TIMEOUT;
import static io.pagewire.kernel.KernelConfiguration.FAULT_HANDLERS;
import static io.pagewire.kernel.KernelConfiguration.FAULT_OVERHEAD;
import static io.pagewire.kernel.KernelConfiguration.CALLER_SHARE;
import static io.pagewire.kernel.KernelConfiguration.MEMLOCK_LIMIT;
import static io.pagewire.kernel.KernelConfiguration.NODE_PIN_LIMIT;
import static io.pagewire.kernel.KernelConfiguration.PAGE_REPLACEMENT;
import static io.pagewire.kernel.KernelConfiguration.PAGE_SIZE;
import static io.pagewire.kernel.KernelConfiguration.PHYSICAL_MEMORY;
import static io.pagewire.kernel.KernelConfiguration.PIN_COST;
import static io.pagewire.kernel.KernelConfiguration.SWAP_BANDWIDTH;
import static io.pagewire.kernel.KernelConfiguration.SWAP_DEVICE;
import static io.pagewire.kernel.KernelConfiguration.SWAP_FILE;
import static io.pagewire.kernel.KernelConfiguration.SWAP_QUEUE_DEPTH;
import static io.pagewire.kernel.KernelConfiguration.SWAP_READ_LATENCY;
import static io.pagewire.kernel.KernelConfiguration.SWAP_SIZE;
import static io.pagewire.kernel.KernelConfiguration.SWAP_WRITE_LATENCY;
import static io.pagewire.kernel.KernelConfiguration.SYSTEM_BUFFER_SIZE;

import io.pagewire.config.SettingValues;
import java.nio.file.Path;

/**
 * The settings one kernel agent runs with: the values of {@link KernelConfiguration}'s settings,
 * fluent setters, and one {@link #conclude()} that rejects a bad value with a message naming its knob.
 */
public final class KernelContext {
    /** The largest page a node may have: a 2 MiB huge page. */
    public static final int MAX_PAGE_SIZE = 2 << 20;

    private final SettingValues settings = new SettingValues(KernelConfiguration.SETTINGS);
    private NanoClock clock = NanoClock.SYSTEM;
    private String name = "kernel";
    private Path memoryFile;
    private boolean concluded;

    /** The values of the kernel's settings, by descriptor (the node's settings registry writes them by name). */
    public SettingValues settings() {
        return settings;
    }

    public KernelContext pageSizeBytes(int value) {
        settings.set(PAGE_SIZE, value);
        return this;
    }

    public KernelContext physicalMemoryBytes(long value) {
        settings.set(PHYSICAL_MEMORY, value);
        return this;
    }

    public KernelContext swapBytes(long value) {
        settings.set(SWAP_SIZE, value);
        return this;
    }

    /** The file backing swap; {@code null} for a temporary file removed at close. */
    public KernelContext swapFile(Path value) {
        settings.set(SWAP_FILE, value);
        return this;
    }

    public KernelContext memlockLimitBytes(long value) {
        settings.set(MEMLOCK_LIMIT, value);
        return this;
    }

    /** The most of each node-wide pool one application may hold (0 to 1]. */
    public KernelContext callerShare(double value) {
        settings.set(CALLER_SHARE, value);
        return this;
    }

    /** The node-wide pin limit; 0 for three quarters of physical memory. */
    public KernelContext nodePinLimitBytes(long value) {
        settings.set(NODE_PIN_LIMIT, value);
        return this;
    }

    public KernelContext systemBufferBytes(long value) {
        settings.set(SYSTEM_BUFFER_SIZE, value);
        return this;
    }

    public KernelContext pageReplacement(PageReplacement value) {
        settings.set(PAGE_REPLACEMENT, value);
        return this;
    }

    public KernelContext dmaDrainTimeoutNs(long value) {
        settings.set(DMA_DRAIN_TIMEOUT, value);
        return this;
    }

    /**
     * How long swap takes: a preset of {@link StorageModel} or figures of one's own. The single
     * figures set below override it, whichever is set first.
     */
    public KernelContext swapDevice(StorageModel value) {
        settings.set(SWAP_DEVICE, value);
        return this;
    }

    /** The swap device's read latency instead of its model's. */
    public KernelContext swapReadLatencyNs(long value) {
        settings.set(SWAP_READ_LATENCY, value);
        return this;
    }

    /** The swap device's write latency instead of its model's. */
    public KernelContext swapWriteLatencyNs(long value) {
        settings.set(SWAP_WRITE_LATENCY, value);
        return this;
    }

    /** The swap device's bandwidth instead of its model's (0: no limit). */
    public KernelContext swapBytesPerSecond(long value) {
        settings.set(SWAP_BANDWIDTH, value);
        return this;
    }

    /** The swap device's queue depth instead of its model's (0: no limit). */
    public KernelContext swapQueueDepth(int value) {
        settings.set(SWAP_QUEUE_DEPTH, value);
        return this;
    }

    /** The fault handler's own time per fault, minor or major. */
    public KernelContext faultOverheadNs(long value) {
        settings.set(FAULT_OVERHEAD, value);
        return this;
    }

    /** The CPU time a page's pin costs, and its unpin (0: only the page-table update). */
    public KernelContext pinCostNs(long value) {
        settings.set(PIN_COST, value);
        return this;
    }

    /** How many NIC page faults are served at once (the fault service's threads). */
    public KernelContext faultHandlers(int value) {
        settings.set(FAULT_HANDLERS, value);
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
        return settings.get(PAGE_SIZE);
    }

    public int pageShift() {
        return Integer.numberOfTrailingZeros(pageSizeBytes());
    }

    public long physicalMemoryBytes() {
        return settings.get(PHYSICAL_MEMORY);
    }

    public int frameCount() {
        return (int) (physicalMemoryBytes() / pageSizeBytes());
    }

    public long swapBytes() {
        return settings.get(SWAP_SIZE);
    }

    /**
     * Where the node's physical memory is made, as a file applications on the host may map; null
     * (the default) for an anonymous one that only the node maps. Not a setting: the node names it
     * after itself in its ring directory.
     */
    public KernelContext memoryFile(Path value) {
        this.memoryFile = value;
        return this;
    }

    public Path memoryFile() {
        return memoryFile;
    }

    public Path swapFile() {
        return settings.get(SWAP_FILE);
    }

    public double callerShare() {
        return settings.get(CALLER_SHARE);
    }

    public long memlockLimitBytes() {
        return settings.get(MEMLOCK_LIMIT);
    }

    public long nodePinLimitBytes() {
        return settings.get(NODE_PIN_LIMIT);
    }

    public long systemBufferBytes() {
        return settings.get(SYSTEM_BUFFER_SIZE);
    }

    public PageReplacement pageReplacement() {
        return settings.get(PAGE_REPLACEMENT);
    }

    public long dmaDrainTimeoutNs() {
        return settings.get(DMA_DRAIN_TIMEOUT);
    }

    /** The swap device's model with the single figures set applied. */
    public StorageModel swapDevice() {
        StorageModel preset = settings.get(SWAP_DEVICE);
        Long read = settings.get(SWAP_READ_LATENCY);
        Long write = settings.get(SWAP_WRITE_LATENCY);
        Long bandwidth = settings.get(SWAP_BANDWIDTH);
        Integer depth = settings.get(SWAP_QUEUE_DEPTH);
        return new StorageModel(read == null ? preset.readLatencyNs() : read, write == null ? preset.writeLatencyNs() : write,
                bandwidth == null ? preset.bytesPerSecond() : bandwidth, depth == null ? preset.queueDepth() : depth);
    }

    public long faultOverheadNs() {
        return settings.get(FAULT_OVERHEAD);
    }

    public int faultHandlers() {
        return settings.get(FAULT_HANDLERS);
    }

    public long pinCostNs() {
        return settings.get(PIN_COST);
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
        settings.check();
        int pageSize = pageSizeBytes();
        long physical = physicalMemoryBytes();
        if (physical % pageSize != 0 || physical / pageSize < 16 || physical / pageSize > Integer.MAX_VALUE / 2) {
            throw invalid(PHYSICAL_MEMORY.name(), "a multiple of the page size (" + pageSize + ") holding at least 16 frames", physical);
        }
        long swap = swapBytes();
        if (swap < 0 || swap % pageSize != 0 || swap / pageSize > Integer.MAX_VALUE / 2) {
            throw invalid(SWAP_SIZE.name(), "a non-negative multiple of the page size (" + pageSize + ")", swap);
        }
        if (nodePinLimitBytes() == 0) {
            settings.set(NODE_PIN_LIMIT, physical / 4 * 3);
        }
        if (nodePinLimitBytes() < 0 || nodePinLimitBytes() > physical) {
            throw invalid(NODE_PIN_LIMIT.name(), "between 1 and the physical memory (" + physical + "), or 0 for the default",
                    nodePinLimitBytes());
        }
        int slot = SystemBuffer.slotBytes(pageSize);
        long buffer = systemBufferBytes();
        if (buffer < slot || buffer % slot != 0 || buffer > Integer.MAX_VALUE) {
            throw invalid(SYSTEM_BUFFER_SIZE.name(), "a multiple of its slot size (" + slot
                    + ": the page size, at most 64 KiB), at least one slot and under 2 GiB", buffer);
        }
        if (clock == null) {
            throw new IllegalArgumentException("clock must be set");
        }
        concluded = true;
        return this;
    }

    private static IllegalArgumentException invalid(String knob, String expected, Object actual) {
        return new IllegalArgumentException(knob + " must be " + expected + ", was " + actual);
    }
}
