package io.pagewire.node.verbs;

import static io.pagewire.node.verbs.VerbsConfiguration.CONTROL_BURST;
import static io.pagewire.node.verbs.VerbsConfiguration.CONTROL_OPS_PER_SECOND;
import static io.pagewire.node.verbs.VerbsConfiguration.RING_BYTES;
import static io.pagewire.node.verbs.VerbsConfiguration.RING_DIRECTORY;
import static io.pagewire.node.verbs.VerbsConfiguration.RING_SLEEP_LIMIT;
import static io.pagewire.node.verbs.VerbsConfiguration.SESSIONS;
import static io.pagewire.node.verbs.VerbsConfiguration.VIRTUAL_BYTES_PER_SESSION;

import io.pagewire.config.SettingValues;
import java.nio.file.Path;

/**
 * The settings the verbs service runs with: the values of {@link VerbsConfiguration}'s settings,
 * fluent setters, and one {@link #conclude()} that rejects a bad value with a message naming its knob.
 */
public final class VerbsContext {
    private final SettingValues settings = new SettingValues(VerbsConfiguration.SETTINGS);

    /** The values of the service's settings, by descriptor (the node's settings registry writes them by name). */
    public SettingValues settings() {
        return settings;
    }

    /** Application sessions the node serves at once. */
    public VerbsContext sessionsLimit(int value) {
        settings.set(SESSIONS, value);
        return this;
    }

    public int sessionsLimit() {
        return settings.get(SESSIONS);
    }

    /** Virtual memory one session may allocate. */
    public VerbsContext virtualBytesPerSession(long value) {
        settings.set(VIRTUAL_BYTES_PER_SESSION, value);
        return this;
    }

    public long virtualBytesPerSession() {
        return settings.get(VIRTUAL_BYTES_PER_SESSION);
    }

    /** Control-plane operations one caller may start per second on average; 0 paces nothing. */
    public VerbsContext controlOpsPerSecond(double value) {
        settings.set(CONTROL_OPS_PER_SECOND, value);
        return this;
    }

    public double controlOpsPerSecond() {
        return settings.get(CONTROL_OPS_PER_SECOND);
    }

    /** Control-plane operations a caller may start back to back before its rate applies. */
    public VerbsContext controlBurst(int value) {
        settings.set(CONTROL_BURST, value);
        return this;
    }

    public int controlBurst() {
        return settings.get(CONTROL_BURST);
    }

    /** Where the rings of co-located applications are made; null (or empty) turns them off. */
    public VerbsContext ringDirectory(Path value) {
        settings.set(RING_DIRECTORY, value);
        return this;
    }

    /** Where rings are made, or null when the node offers none. */
    public Path ringDirectory() {
        return settings.get(RING_DIRECTORY);
    }

    /** Record space of each of a session's two rings (a power of two). */
    public VerbsContext ringBytes(int value) {
        settings.set(RING_BYTES, value);
        return this;
    }

    public int ringBytes() {
        return settings.get(RING_BYTES);
    }

    /** How long a sleeping ring reader goes without looking at its ring. */
    public VerbsContext ringSleepLimitNs(long value) {
        settings.set(RING_SLEEP_LIMIT, value);
        return this;
    }

    public long ringSleepLimitNs() {
        return settings.get(RING_SLEEP_LIMIT);
    }

    /**
     * Validates every knob.
     *
     * @throws IllegalArgumentException naming the first knob whose value is unusable
     */
    public VerbsContext conclude() {
        settings.check();
        return this;
    }
}
