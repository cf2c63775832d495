package io.pagewire.config;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

/**
 * How a setting's value is written and read, with its unit: sizes take {@code 64KiB}, durations
 * {@code 200ms}, counts are plain numbers. A value that does not parse is an error naming the setting.
 *
 * @param name the type as the configuration reference shows it ("bytes", "duration", ...)
 */
public record SettingType<T>(String name, Parser<T> parser, Function<? super T, String> formatter) {
    /** Reads a value written for a setting, or throws naming the setting. */
    @FunctionalInterface
    public interface Parser<T> {
        T parse(String setting, String text);
    }

    private static final Pattern SIZE = Pattern.compile("(?i)\\s*(\\d+)\\s*(b|k|kb|kib|m|mb|mib|g|gb|gib|t|tb|tib)?\\s*");
    private static final Pattern TIME = Pattern.compile("(?i)\\s*(\\d+)\\s*(ns|us|µs|ms|s|m|min|h)?\\s*");

    /** A whole number of things (entries, packets, retries, threads). */
    public static final SettingType<Integer> COUNT = new SettingType<>("count", (s, t) -> (int) wholeNumber(s, t, Integer.MIN_VALUE,
            Integer.MAX_VALUE), String::valueOf);
    /** A 64-bit whole number (a seed). */
    public static final SettingType<Long> NUMBER = new SettingType<>("number", (s, t) -> wholeNumber(s, t, Long.MIN_VALUE, Long.MAX_VALUE),
            String::valueOf);
    /** A size in bytes, with an optional unit: 4096, 64KiB, 256MiB, 1GiB. */
    public static final SettingType<Long> BYTES = new SettingType<>("bytes", SettingType::bytes, SettingType::formatBytes);
    /** A size in bytes below 2 GiB (a buffer, a message, an MTU). */
    public static final SettingType<Integer> INT_BYTES = new SettingType<>("bytes", (s, t) -> {
        long bytes = bytes(s, t);
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(s + " must be below 2 GiB, was '" + t + "'");
        }
        return (int) bytes;
    }, b -> formatBytes((long) b));
    /** A duration in nanoseconds, with an optional unit: 200000, 200us, 200ms, 2s, 30m, 1h. */
    public static final SettingType<Long> DURATION = new SettingType<>("duration", SettingType::nanos, SettingType::formatNanos);
    /** A decimal number (a rate). */
    public static final SettingType<Double> DECIMAL = new SettingType<>("number", (s, t) -> decimal(s, t, "a number such as 500"),
            SettingType::formatDecimal);
    /** A probability from 0 to 1. */
    public static final SettingType<Double> PROBABILITY = new SettingType<>("probability", (s, t) -> decimal(s, t, "a probability such as 0.05"),
            SettingType::formatDecimal);
    /** Free text, trimmed. */
    public static final SettingType<String> TEXT = new SettingType<>("text", (s, t) -> t.trim(), v -> v);
    /** A file or directory; empty for none. */
    public static final SettingType<Path> PATH = new SettingType<>("path", (s, t) -> t.isBlank() ? null : Path.of(t.trim()),
            p -> p == null ? "" : p.toString());
    /** Node ids, comma-separated. */
    public static final SettingType<Set<String>> IDS = new SettingType<>("ids", (s, t) -> ids(t), v -> String.join(",", v));
    /** Peers as id=host:port, comma-separated. */
    public static final SettingType<Map<String, String>> PEERS = new SettingType<>("id=host:port,...", SettingType::peers,
            v -> v.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue()).collect(Collectors.joining(",")));

    /** One of an enum's constants, by name in any case, '-' for '_'. */
    public static <E extends Enum<E>> SettingType<E> choice(Class<E> type) {
        E[] constants = type.getEnumConstants();
        String names = Arrays.stream(constants).map(c -> c.name().toLowerCase(Locale.ROOT)).collect(Collectors.joining("|"));
        return new SettingType<>(names, (s, t) -> {
            String wanted = t.trim().toUpperCase(Locale.ROOT).replace('-', '_');
            for (E constant : constants) {
                if (constant.name().equals(wanted)) {
                    return constant;
                }
            }
            throw new IllegalArgumentException(s + " must be one of " + names.replace("|", ", ") + ", was '" + t + "'");
        }, c -> c.name().toLowerCase(Locale.ROOT));
    }

    /** A value read by a parser of its own (a named preset). */
    public static <T> SettingType<T> of(String name, Parser<T> parser, Function<? super T, String> formatter) {
        return new SettingType<>(name, parser, formatter);
    }

    /** Reads {@code text} written for {@code setting}. */
    public T parse(String setting, String text) {
        return parser.parse(setting, text);
    }

    /** The value as it would be written in a configuration. */
    public String format(T value) {
        return formatter.apply(value);
    }

    /** A byte count, with an optional unit: 4096, 64KiB, 256MiB, 1G. */
    public static long bytes(String setting, String text) {
        Matcher m = SIZE.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException(setting + " must be a size such as 4096, 64KiB or 256MiB, was '" + text + "'");
        }
        long n = Long.parseLong(m.group(1));
        String unit = m.group(2) == null ? "b" : m.group(2).toLowerCase(Locale.ROOT);
        int shift = switch (unit.charAt(0)) {
            case 'k' -> 10;
            case 'm' -> 20;
            case 'g' -> 30;
            case 't' -> 40;
            default -> 0;
        };
        if (n > Long.MAX_VALUE >> shift) {
            throw new IllegalArgumentException(setting + " is too large: '" + text + "'");
        }
        return n << shift;
    }

    /** A duration in nanoseconds, with an optional unit: 200000, 200us, 200ms, 2s, 30m, 1h. */
    public static long nanos(String setting, String text) {
        Matcher m = TIME.matcher(text);
        if (!m.matches()) {
            throw new IllegalArgumentException(setting + " must be a duration such as 200ms, 50us, 2s or 30m (plain numbers are ns), was '"
                    + text + "'");
        }
        long n = Long.parseLong(m.group(1));
        String unit = m.group(2) == null ? "ns" : m.group(2).toLowerCase(Locale.ROOT);
        long scale = switch (unit) {
            case "us", "µs" -> 1_000L;
            case "ms" -> 1_000_000L;
            case "s" -> 1_000_000_000L;
            case "m", "min" -> 60_000_000_000L;
            case "h" -> 3_600_000_000_000L;
            default -> 1L;
        };
        if (n > Long.MAX_VALUE / scale) {
            throw new IllegalArgumentException(setting + " is too long: '" + text + "'");
        }
        return n * scale;
    }

    private static long wholeNumber(String setting, String text, long min, long max) {
        try {
            long value = Long.parseLong(text.trim());
            if (value < min || value > max) {
                throw new NumberFormatException();
            }
            return value;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(setting + " must be a whole number, was '" + text + "'");
        }
    }

    private static double decimal(String setting, String text, String expected) {
        try {
            return Double.parseDouble(text.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(setting + " must be " + expected + ", was '" + text + "'");
        }
    }

    private static Set<String> ids(String text) {
        Set<String> ids = Arrays.stream(text.split(",")).map(String::trim).filter(s -> !s.isEmpty())
                .collect(Collectors.toCollection(TreeSet::new));
        return Collections.unmodifiableSet(ids);
    }

    private static Map<String, String> peers(String setting, String text) {
        Map<String, String> peers = new LinkedHashMap<>();
        for (String part : text.split(",")) {
            if (part.isBlank()) {
                continue;
            }
            int eq = part.indexOf('=');
            if (eq <= 0 || eq == part.length() - 1) {
                throw new IllegalArgumentException(setting + " must be id=host:port[,id=host:port...], was '" + text + "'");
            }
            peers.put(part.substring(0, eq).trim(), part.substring(eq + 1).trim());
        }
        return Collections.unmodifiableMap(peers);
    }

    private static String formatBytes(long bytes) {
        String[] units = {"TiB", "GiB", "MiB", "KiB"};
        int[] shifts = {40, 30, 20, 10};
        for (int i = 0; i < units.length; i++) {
            if (bytes != 0 && bytes % (1L << shifts[i]) == 0) {
                return (bytes >> shifts[i]) + units[i];
            }
        }
        return Long.toString(bytes);
    }

    private static String formatNanos(long nanos) {
        if (nanos == 0) {
            return "0";
        }
        long[] scales = {3_600_000_000_000L, 60_000_000_000L, 1_000_000_000L, 1_000_000L, 1_000L};
        String[] units = {"h", "m", "s", "ms", "us"};
        for (int i = 0; i < scales.length; i++) {
            if (nanos % scales[i] == 0) {
                return nanos / scales[i] + units[i];
            }
        }
        return nanos + "ns";
    }

    private static String formatDecimal(double value) {
        return value == Math.rint(value) && Math.abs(value) < 1e15 ? Long.toString((long) value) : Double.toString(value);
    }
}
