package io.pagewire.kernel;

import java.util.Locale;

/** Formats byte counts the way people read them in error messages: {@code 64 MiB}, {@code 12 KiB}. */
public final class ByteSizes {
    private static final long KIB = 1024;
    private static final long MIB = KIB * 1024;
    private static final long GIB = MIB * 1024;

    private ByteSizes() {
    }

    /**
     * In the largest unit that states the count exactly (1025 MiB rather than 1.0 GiB), so that
     * numbers in an error message add up; with one decimal only when no unit is exact.
     */
    public static String format(long bytes) {
        long magnitude = Math.abs(bytes);
        long[] units = {GIB, MIB, KIB};
        String[] names = {"GiB", "MiB", "KiB"};
        for (int i = 0; i < units.length; i++) {
            if (magnitude >= units[i] && bytes % units[i] == 0) {
                return (bytes / units[i]) + " " + names[i];
            }
        }
        for (int i = 0; i < units.length; i++) {
            if (magnitude >= units[i]) {
                return scaled(bytes, units[i], names[i]);
            }
        }
        return bytes + " bytes";
    }

    private static String scaled(long bytes, long unit, String name) {
        if (bytes % unit == 0) {
            return (bytes / unit) + " " + name;
        }
        return String.format(Locale.ROOT, "%.1f %s", (double) bytes / unit, name);
    }
}
