package io.pagewire.config;

import java.util.Objects;

/**
 * A meter as Prometheus shows it, declared once: its name, base unit, kind and help. The series of one
 * meter differ in their tags ({@code mode}, {@code side}, {@code peer}); every series of a node also
 * carries the {@code node} tag. Grafana's dashboards query {@link #prometheusName()}.
 */
public record Meter(String name, String baseUnit, Kind kind, String help) {
    /** How a meter behaves. */
    public enum Kind {
        COUNTER,
        GAUGE,
        TIMER
    }

    public Meter {
        if (!name.matches("pagewire(\\.[a-z0-9]+)+")) {
            throw new IllegalArgumentException("a meter is named pagewire.words.with.dots, not '" + name + "'");
        }
        Objects.requireNonNull(kind);
        Objects.requireNonNull(help);
    }

    public static Meter counter(String name, String help) {
        return new Meter(name, null, Kind.COUNTER, help);
    }

    public static Meter counter(String name, String baseUnit, String help) {
        return new Meter(name, baseUnit, Kind.COUNTER, help);
    }

    public static Meter gauge(String name, String help) {
        return new Meter(name, null, Kind.GAUGE, help);
    }

    public static Meter gauge(String name, String baseUnit, String help) {
        return new Meter(name, baseUnit, Kind.GAUGE, help);
    }

    /** A timer in seconds, published as a histogram. */
    public static Meter timer(String name, String help) {
        return new Meter(name, "seconds", Kind.TIMER, help);
    }

    /** The name Prometheus exposes (for a timer, the stem of its _count, _sum and _bucket series). */
    public String prometheusName() {
        String exposed = name.replace('.', '_');
        if (baseUnit != null && !exposed.endsWith("_" + baseUnit)) {
            exposed = exposed + "_" + baseUnit;
        }
        return kind == Kind.COUNTER ? exposed + "_total" : exposed;
    }
}
