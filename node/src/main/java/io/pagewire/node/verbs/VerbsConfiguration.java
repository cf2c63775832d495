package io.pagewire.node.verbs;

import io.pagewire.config.Setting;
import io.pagewire.config.SettingType;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * Every knob of the service applications use (its sessions' quotas, control-plane pacing and the
 * shared-memory rings of co-located applications), each declared once: name, type with unit,
 * default, check and doc. {@link VerbsContext} holds their values.
 */
public final class VerbsConfiguration {
    public static final Setting<Integer> SESSIONS = Setting.count("pagewire.quota.sessions", 1024,
            "Application sessions the node serves at once; one more is refused with RESOURCE_EXHAUSTED").atLeast(1);
    public static final Setting<Long> VIRTUAL_BYTES_PER_SESSION = Setting.bytes("pagewire.quota.virtualBytesPerSession", 1L << 40,
            "Virtual memory one session may allocate").atLeast(1);
    public static final Setting<Double> CONTROL_OPS_PER_SECOND = Setting.decimal("pagewire.quota.controlOpsPerSecond", 500,
            "Control-plane operations (session opens, allocations, registrations, queue pairs, counters) one caller may start per"
                    + " second on average; more start later; 0 paces nothing")
            .where(v -> v >= 0 && !v.isInfinite(), "0 (off) or a positive rate");
    public static final Setting<Integer> CONTROL_BURST = Setting.count("pagewire.quota.controlBurst", 100,
            "Control-plane operations a caller may start back to back before its rate applies").atLeast(1);
    public static final Setting<Path> RING_DIRECTORY = Setting.of("pagewire.node.ringDirectory", SettingType.PATH,
            defaultRingDirectory(), "Where the node makes the shared-memory rings of co-located applications and its physical memory file,"
                    + " which they may map; empty turns both off (the memory is then anonymous)");
    public static final Setting<Integer> RING_BYTES = Setting.intBytes("pagewire.node.ringBytes", 1 << 20,
            "Record space of each of a session's two rings").where(v -> v >= 4096 && Integer.bitCount(v) == 1,
            "a power of two of at least 4096");
    public static final Setting<Long> RING_SLEEP_LIMIT = Setting.nanos("pagewire.rings.sleepLimitNs", 50_000_000L,
            "How long a sleeping ring reader may miss a lost doorbell: it looks at its ring this often anyway")
            .where(v -> v >= 1_000_000, "at least 1 ms");

    /** Every setting above, in declaration order. */
    public static final List<Setting<?>> SETTINGS = Setting.declaredIn(VerbsConfiguration.class);

    private VerbsConfiguration() {
    }

    /** /dev/shm where the host has it (memory, not disk), else the temporary directory. */
    private static Path defaultRingDirectory() {
        Path shm = Path.of("/dev/shm");
        return Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir"));
    }
}
