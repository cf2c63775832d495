package io.pagewire.config;

import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;

/**
 * The values of one component's settings: each starts at its default (or the JVM system property of
 * its name), a setter or a written value replaces it, and {@link #check} holds every one to its
 * descriptor's rule. A context ({@code NicContext}) keeps one and reads its typed getters from it.
 */
public final class SettingValues {
    private final List<Setting<?>> declared;
    private final Map<Setting<?>, Object> values = new IdentityHashMap<>();

    public SettingValues(List<Setting<?>> declared) {
        this.declared = declared;
        for (Setting<?> setting : declared) {
            values.put(setting, setting.initialValue());
        }
    }

    /** The settings these values are for. */
    public List<Setting<?>> declared() {
        return declared;
    }

    public boolean declares(Setting<?> setting) {
        return values.containsKey(setting);
    }

    @SuppressWarnings("unchecked")
    public <T> T get(Setting<T> setting) {
        Object value = values.get(setting);
        if (value == null && !values.containsKey(setting)) {
            throw new IllegalArgumentException(setting + " is not a setting of this component");
        }
        return (T) value;
    }

    public <T> void set(Setting<T> setting, T value) {
        if (!values.containsKey(setting)) {
            throw new IllegalArgumentException(setting + " is not a setting of this component");
        }
        values.put(setting, value);
    }

    /** Sets a value written in a configuration (a file, the environment, the command line). */
    public <T> void setText(Setting<T> setting, String text) {
        set(setting, setting.parse(text));
    }

    /**
     * Holds every value to its setting's rule.
     *
     * @throws IllegalArgumentException naming the first setting whose value is unusable
     */
    public void check() {
        for (Setting<?> setting : declared) {
            check(setting);
        }
    }

    private <T> void check(Setting<T> setting) {
        setting.check(get(setting));
    }
}
