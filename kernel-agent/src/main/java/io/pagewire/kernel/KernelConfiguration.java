package io.pagewire.kernel;

import io.pagewire.config.Setting;
import io.pagewire.config.SettingType;
import java.nio.file.Path;
import java.util.List;

/**
 * Every knob of the kernel agent, each declared once: name, type with unit, default, check and doc.
 * {@link KernelContext} holds their values (a JVM system property of a knob's name overrides its
 * default) and checks how they fit together.
 */
public final class KernelConfiguration {
    public static final Setting<Integer> PAGE_SIZE = Setting.intBytes("pagewire.kernel.pageSizeBytes", 4096,
            "Size of a page and of a frame: a power of two from 512 bytes to 2 MiB (a huge page)")
            .where(v -> v >= 512 && v <= KernelContext.MAX_PAGE_SIZE && Integer.bitCount(v) == 1,
                    "a power of two from 512 to " + KernelContext.MAX_PAGE_SIZE + " (2 MiB, a huge page)");
    public static final Setting<Long> PHYSICAL_MEMORY = Setting.bytes("pagewire.kernel.physicalMemoryBytes", 256L << 20,
            "Emulated physical memory: frames of the page size, at least 16 of them");
    public static final Setting<Long> SWAP_SIZE = Setting.bytes("pagewire.kernel.swapBytes", 1L << 30,
            "Size of the swap device, a multiple of the page size; 0 for no swap");
    public static final Setting<Path> SWAP_FILE = Setting.path("pagewire.kernel.swapFile",
            "File that backs the swap device; empty for a temporary file deleted when the agent stops");
    public static final Setting<Long> MEMLOCK_LIMIT = Setting.bytes("pagewire.kernel.memlockLimitBytes", 128L << 20,
            "Memory one endpoint may have pinned, like RLIMIT_MEMLOCK (the default takes the receive pools one UCX process pins, "
            + "about 100 MiB)").atLeast(0);
    public static final Setting<Long> NODE_PIN_LIMIT = Setting.bytes("pagewire.kernel.nodePinLimitBytes", 0,
            "Memory the whole node may have pinned; 0 for three quarters of physical memory");
    public static final Setting<Double> CALLER_SHARE = Setting.of("pagewire.quota.callerShare", SettingType.DECIMAL, 0.5,
            "The most of each node-wide pool (sessions, frames and swap, the pin limit, receive credits) one application may hold")
            .where(v -> v > 0 && v <= 1, "a fraction above 0, at most 1");
    public static final Setting<Long> SYSTEM_BUFFER_SIZE = Setting.bytes("pagewire.kernel.systemBufferBytes", 1L << 20,
            "NetVM's system buffer, which parks received data for non-resident pages: whole slots of a page (64 KiB with larger pages)");
    public static final Setting<PageReplacement> PAGE_REPLACEMENT = Setting.choice("pagewire.kernel.pageReplacement", PageReplacement.class,
            PageReplacement.CLOCK, "Which frame page replacement takes: CLOCK, or FIFO to compare it with")
            .where(v -> v != null, "set");
    public static final Setting<Long> DMA_DRAIN_TIMEOUT = Setting.nanos("pagewire.kernel.dmaDrainTimeoutNs", 10_000_000_000L,
            "How long freeing memory waits for in-flight DMA on its pages to drain before it gives up").where(v -> v > 0, "positive");
    public static final Setting<StorageModel> SWAP_DEVICE = Setting.of("pagewire.kernel.swapDevice",
            SettingType.of("nvme|sata-ssd|hdd|ram", StorageModel::preset, StorageModel::presetName), StorageModel.NVME,
            "The device swap emulates, by preset; a major fault waits out its latency and transfer with the kernel lock released")
            .where(v -> v != null, "set");
    public static final Setting<Long> SWAP_READ_LATENCY = Setting.of("pagewire.kernel.swapReadLatencyNs", SettingType.DURATION, null,
            "The swap device's read latency instead of its preset's; unset keeps the preset's").where(KernelConfiguration::figure,
            "zero or positive, or unset for the device preset's");
    public static final Setting<Long> SWAP_WRITE_LATENCY = Setting.of("pagewire.kernel.swapWriteLatencyNs", SettingType.DURATION, null,
            "The swap device's write latency instead of its preset's; unset keeps the preset's").where(KernelConfiguration::figure,
            "zero or positive, or unset for the device preset's");
    public static final Setting<Long> SWAP_BANDWIDTH = Setting.of("pagewire.kernel.swapBytesPerSecond", SettingType.BYTES, null,
            "The swap device's bandwidth in bytes per second instead of its preset's (0: no limit); unset keeps the preset's")
            .where(KernelConfiguration::figure, "zero or positive, or unset for the device preset's");
    public static final Setting<Integer> SWAP_QUEUE_DEPTH = Setting.of("pagewire.kernel.swapQueueDepth", SettingType.COUNT, null,
            "Requests the swap device serves at once instead of its preset's (0: no limit); unset keeps the preset's")
            .where(v -> v == null || v >= 0, "zero or positive, or unset for the device preset's");
    public static final Setting<Long> FAULT_OVERHEAD = Setting.nanos("pagewire.kernel.faultOverheadNs", 0,
            "The fault handler's own time per fault, minor or major, waited with the kernel lock released").where(v -> v >= 0,
            "zero or positive");
    public static final Setting<Integer> FAULT_HANDLERS = Setting.count("pagewire.kernel.faultHandlers", 4,
            "Page faults raised by NICs served at once (the fault service's threads), so their swap reads overlap").between(1, 256);
    public static final Setting<Long> PIN_COST = Setting.nanos("pagewire.kernel.pinCostNs", 0,
            "CPU time one page's pin, and its unpin, costs (get_user_pages and the NIC's table update), spent busy by the pinning thread")
            .where(v -> v >= 0 && v <= 1_000_000_000L, "0 to 1 s");

    /** Every setting above, in declaration order. */
    public static final List<Setting<?>> SETTINGS = Setting.declaredIn(KernelConfiguration.class);

    private KernelConfiguration() {
    }

    private static boolean figure(Long value) {
        return value == null || value >= 0;
    }
}
