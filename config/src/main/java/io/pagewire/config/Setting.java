package io.pagewire.config;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.function.Predicate;

/**
 * One knob of a Pagewire component, declared once: its name, type with unit, default, check and one
 * line of doc. Contexts hold its value ({@link SettingValues}); the node's settings registry, the
 * environment variable, {@code pagewire node --list-settings} and the configuration reference are all
 * read off the descriptor. A component declares its settings as constants of one class
 * ({@code NicConfiguration.TLB_ENTRIES}); {@link #declaredIn} lists them.
 */
public final class Setting<T> {
    private final String name;
    private final SettingType<T> type;
    private final T defaultValue;
    private final String doc;
    private final Predicate<? super T> check;
    private final String expected;

    private Setting(String name, SettingType<T> type, T defaultValue, String doc, Predicate<? super T> check, String expected) {
        if (!name.matches("pagewire(\\.[a-z][A-Za-z0-9]*)+")) {
            throw new IllegalArgumentException("a setting is named pagewire.area.knobName, not '" + name + "'");
        }
        this.name = name;
        this.type = Objects.requireNonNull(type);
        this.defaultValue = defaultValue;
        this.doc = Objects.requireNonNull(doc);
        this.check = check;
        this.expected = expected;
    }

    /** A setting of any type; {@code defaultValue} may be null where the type allows "none" (a path). */
    public static <T> Setting<T> of(String name, SettingType<T> type, T defaultValue, String doc) {
        return new Setting<>(name, type, defaultValue, doc, v -> true, null);
    }

    public static Setting<Integer> count(String name, int defaultValue, String doc) {
        return of(name, SettingType.COUNT, defaultValue, doc);
    }

    public static Setting<Long> number(String name, long defaultValue, String doc) {
        return of(name, SettingType.NUMBER, defaultValue, doc);
    }

    public static Setting<Long> bytes(String name, long defaultValue, String doc) {
        return of(name, SettingType.BYTES, defaultValue, doc);
    }

    public static Setting<Integer> intBytes(String name, int defaultValue, String doc) {
        return of(name, SettingType.INT_BYTES, defaultValue, doc);
    }

    public static Setting<Long> nanos(String name, long defaultValue, String doc) {
        return of(name, SettingType.DURATION, defaultValue, doc);
    }

    public static Setting<Double> decimal(String name, double defaultValue, String doc) {
        return of(name, SettingType.DECIMAL, defaultValue, doc);
    }

    /** A probability, from 0 to below 1. */
    public static Setting<Double> probability(String name, double defaultValue, String doc) {
        return of(name, SettingType.PROBABILITY, defaultValue, doc).where(p -> p >= 0 && p < 1, "a probability from 0 to below 1");
    }

    public static Setting<String> text(String name, String defaultValue, String doc) {
        return of(name, SettingType.TEXT, defaultValue, doc);
    }

    public static Setting<Path> path(String name, String doc) {
        return of(name, SettingType.PATH, null, doc);
    }

    public static <E extends Enum<E>> Setting<E> choice(String name, Class<E> type, E defaultValue, String doc) {
        return of(name, SettingType.choice(type), defaultValue, doc);
    }

    public static Setting<Set<String>> ids(String name, String doc) {
        return of(name, SettingType.IDS, Set.of(), doc);
    }

    public static Setting<Map<String, String>> peers(String name, String doc) {
        return of(name, SettingType.PEERS, Map.of(), doc);
    }

    /** The same setting, accepting only values that pass {@code accept}; {@code expected} says which in words. */
    public Setting<T> where(Predicate<? super T> accept, String expected) {
        return new Setting<>(name, type, defaultValue, doc, accept, expected);
    }

    /** A number from {@code min} to {@code max}, both included. */
    public Setting<T> between(long min, long max) {
        return where(v -> ((Number) v).longValue() >= min && ((Number) v).longValue() <= max, "from " + min + " to " + max);
    }

    /** A number of at least {@code min}. */
    public Setting<T> atLeast(long min) {
        return where(v -> ((Number) v).longValue() >= min, min == 1 ? "at least 1" : "at least " + min);
    }

    public String name() {
        return name;
    }

    public SettingType<T> type() {
        return type;
    }

    /** The value when nothing sets it (null: none). */
    public T defaultValue() {
        return defaultValue;
    }

    /** One line on what the knob does. */
    public String doc() {
        return doc;
    }

    /** The default as it would be written in a configuration ("" for none). */
    public String formattedDefault() {
        return defaultValue == null ? "" : type.format(defaultValue);
    }

    /** The environment variable of the setting: {@code pagewire.kernel.physicalMemoryBytes} is {@code PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES}. */
    public String environmentName() {
        return environmentName(name);
    }

    /** The environment variable of a setting's name. */
    public static String environmentName(String name) {
        return name.replaceAll("([a-z0-9])([A-Z])", "$1_$2").replace('.', '_').toUpperCase(Locale.ROOT);
    }

    /** Reads a value written for this setting. */
    public T parse(String text) {
        return type.parse(name, text);
    }

    /**
     * Checks a value against the setting's rule.
     *
     * @throws IllegalArgumentException naming the setting, what it must be, and what it was
     */
    public T check(T value) {
        if (!check.test(value)) {
            throw new IllegalArgumentException(name + " must be " + expected + ", was " + value);
        }
        return value;
    }

    /** The value a JVM system property of the setting's name gives, else the default. */
    public T initialValue() {
        String property = System.getProperty(name);
        return property == null ? defaultValue : parse(property);
    }

    /** Every {@code public static final Setting} constant of a class, in declaration order. */
    public static List<Setting<?>> declaredIn(Class<?> configuration) {
        List<Setting<?>> settings = new ArrayList<>();
        for (Field field : configuration.getDeclaredFields()) {
            int m = field.getModifiers();
            if (Modifier.isStatic(m) && Modifier.isFinal(m) && Modifier.isPublic(m) && field.getType() == Setting.class) {
                try {
                    settings.add((Setting<?>) field.get(null));
                } catch (IllegalAccessException e) {
                    throw new IllegalStateException(e);
                }
            }
        }
        return List.copyOf(settings);
    }

    @Override
    public String toString() {
        return name;
    }
}
