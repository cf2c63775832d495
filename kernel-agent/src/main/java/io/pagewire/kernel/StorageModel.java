package io.pagewire.kernel;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * How long the swap device takes to serve a request: an access latency for reads and for writes,
 * a transfer bandwidth shared by every request, and how many requests it serves at once (its queue
 * depth; more wait for a free slot). A request costs its access latency, overlapped with the
 * others in service, plus its bytes at the device's bandwidth, one transfer after another.
 *
 * <p>The presets stand for common devices' 4 KiB random-access figures: {@code nvme} (the default),
 * {@code sata-ssd}, {@code hdd}, and {@code ram} (no latency, no bandwidth limit: swap as fast as
 * the file under it).
 *
 * @param readLatencyNs access latency of a read
 * @param writeLatencyNs access latency of a write
 * @param bytesPerSecond transfer bandwidth; 0 for no limit
 * @param queueDepth requests in service at once; 0 for no limit
 */
public record StorageModel(long readLatencyNs, long writeLatencyNs, long bytesPerSecond, int queueDepth) {
    /** No latency and no limits: today's page-cache file. */
    public static final StorageModel RAM = new StorageModel(0, 0, 0, 0);
    /** An NVMe flash drive: ~80 us reads, ~20 us writes (into its cache), 2 GB/s, 32 commands at once. */
    public static final StorageModel NVME = new StorageModel(80_000, 20_000, 2_000_000_000L, 32);
    /** A SATA flash drive: ~150 us reads, ~60 us writes, 530 MB/s, NCQ's 32 commands. */
    public static final StorageModel SATA_SSD = new StorageModel(150_000, 60_000, 530_000_000L, 32);
    /** A 7,200 rpm disk: ~8 ms a random access (seek and half a turn), 150 MB/s, one access at a time. */
    public static final StorageModel HDD = new StorageModel(8_000_000, 8_000_000, 150_000_000L, 1);

    private static final Map<String, StorageModel> PRESETS = presets();

    public StorageModel {
        if (readLatencyNs < 0 || writeLatencyNs < 0) {
            throw new IllegalArgumentException("a device's latencies must be zero or positive, were " + readLatencyNs + " and " + writeLatencyNs + " ns");
        }
        if (bytesPerSecond < 0) {
            throw new IllegalArgumentException("a device's bandwidth must be zero (no limit) or positive, was " + bytesPerSecond);
        }
        if (queueDepth < 0) {
            throw new IllegalArgumentException("a device's queue depth must be zero (no limit) or positive, was " + queueDepth);
        }
    }

    /**
     * The preset of that name ({@code ram}, {@code nvme}, {@code sata-ssd}, {@code hdd}; any case).
     *
     * @throws IllegalArgumentException naming {@code knob} and the presets for any other name
     */
    public static StorageModel preset(String knob, String name) {
        StorageModel model = name == null ? null : PRESETS.get(name.trim().toLowerCase(Locale.ROOT));
        if (model == null) {
            throw new IllegalArgumentException(knob + " must be one of " + String.join(", ", PRESETS.keySet()) + ", was " + name);
        }
        return model;
    }

    /** The preset's name, or null for a model of custom figures. */
    public String presetName() {
        for (Map.Entry<String, StorageModel> preset : PRESETS.entrySet()) {
            if (preset.getValue().equals(this)) {
                return preset.getKey();
            }
        }
        return null;
    }

    public StorageModel withReadLatencyNs(long value) {
        return new StorageModel(value, writeLatencyNs, bytesPerSecond, queueDepth);
    }

    public StorageModel withWriteLatencyNs(long value) {
        return new StorageModel(readLatencyNs, value, bytesPerSecond, queueDepth);
    }

    /** The same device with one access latency for reads and writes alike. */
    public StorageModel withLatencyNs(long value) {
        return new StorageModel(value, value, bytesPerSecond, queueDepth);
    }

    public StorageModel withBytesPerSecond(long value) {
        return new StorageModel(readLatencyNs, writeLatencyNs, value, queueDepth);
    }

    public StorageModel withQueueDepth(int value) {
        return new StorageModel(readLatencyNs, writeLatencyNs, bytesPerSecond, value);
    }

    /** Nanoseconds {@code bytes} (at most a huge page) take to transfer at the device's bandwidth; 0 without a limit. */
    long transferNs(int bytes) {
        return bytesPerSecond == 0 ? 0 : bytes * 1_000_000_000L / bytesPerSecond;
    }

    @Override
    public String toString() {
        String name = presetName();
        String figures = String.format(Locale.ROOT, "read %.1f us, write %.1f us, %s, queue depth %s",
                readLatencyNs / 1e3, writeLatencyNs / 1e3,
                bytesPerSecond == 0 ? "no bandwidth limit" : String.format(Locale.ROOT, "%.0f MB/s", bytesPerSecond / 1e6),
                queueDepth == 0 ? "unlimited" : Integer.toString(queueDepth));
        return name == null ? figures : name + " (" + figures + ")";
    }

    private static Map<String, StorageModel> presets() {
        Map<String, StorageModel> presets = new LinkedHashMap<>();
        presets.put("nvme", NVME);
        presets.put("sata-ssd", SATA_SSD);
        presets.put("hdd", HDD);
        presets.put("ram", RAM);
        return presets;
    }
}
