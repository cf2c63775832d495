package io.pagewire.kernel;

/** Formats byte counts the way people read them in error messages: {@code 64 MiB}, {@code 12 KiB}. */
public final class ByteSizes {
    private static final long KIB = 1024;
    private static final long MIB = KIB * 1024;
    private static final long GIB = MIB * 1024;

    private ByteSizes() {
    }

    /** Exact when the count is a whole number of the unit, else with one decimal. */
    public static String format(long bytes) {
        long magnitude = Math.abs(bytes);
        if (magnitude >= GIB) {
            return scaled(bytes, GIB, "GiB");
        }
        if (magnitude >= MIB) {
            return scaled(bytes, MIB, "MiB");
        }
        if (magnitude >= KIB) {
            return scaled(bytes, KIB, "KiB");
        }
        return bytes + " bytes";
    }

    private static String scaled(long bytes, long unit, String name) {
        if (bytes % unit == 0) {
            return (bytes / unit) + " " + name;
        }
        return String.format(java.util.Locale.ROOT, "%.1f %s", (double) bytes / unit, name);
    }
}
