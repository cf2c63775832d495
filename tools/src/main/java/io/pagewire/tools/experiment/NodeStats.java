package io.pagewire.tools.experiment;

import io.pagewire.client.Pagewire;
import io.pagewire.config.CountedEvent;
import io.pagewire.config.Meter;
import java.util.List;
import java.util.Map;

/**
 * A node's meters read at one moment through the SDK, summed by name and tags: how an experiment
 * that runs against a running cluster reads what it measures ({@code pagewire stat}'s figures), and,
 * as the difference of two readings, what its own workload did.
 */
public record NodeStats(List<Pagewire.Stat> stats) {
    /** Reads the node's meters now. */
    public static NodeStats read(Pagewire node) {
        return new NodeStats(node.statList());
    }

    /**
     * The sum of the meters named {@code name} (as Prometheus names them: a counter's ends in
     * "_total", a gauge's in its unit) whose tags include every one of {@code tags}, given as
     * "key=value".
     */
    public double sum(String name, String... tags) {
        double total = 0;
        for (Pagewire.Stat stat : stats) {
            if (stat.name().equals(name) && matches(stat.tags(), tags)) {
                total += stat.value();
            }
        }
        return total;
    }

    /** What {@link #sum} grew by since {@code before}. */
    public double since(NodeStats before, String name, String... tags) {
        return sum(name, tags) - before.sum(name, tags);
    }

    /** What a node counted of one NIC or kernel event (summed over the tags it does not name: the registration modes, say). */
    public long count(CountedEvent event) {
        List<String> pairs = event.tags();
        String[] tags = new String[pairs.size() / 2];
        for (int i = 0; i < tags.length; i++) {
            tags[i] = pairs.get(2 * i) + "=" + pairs.get(2 * i + 1);
        }
        return Math.round(sum(event.meter().prometheusName(), tags) / event.scale());
    }

    /** What {@link #count} grew by since {@code before}. */
    public long since(NodeStats before, CountedEvent event) {
        return count(event) - before.count(event);
    }

    /** A timer's count and total over its series whose tags include every one of {@code tags}. */
    public Timed timer(Meter timer, String... tags) {
        return new Timed(Math.round(sum(timer.prometheusName() + "_count", tags)), sum(timer.prometheusName() + "_sum", tags));
    }

    /** What a timer timed: how many and how long in all. */
    public record Timed(long count, double seconds) {
        public Timed since(Timed before) {
            return new Timed(count - before.count, seconds - before.seconds);
        }

        /** The mean in microseconds, or 0 when nothing was timed. */
        public double meanUs() {
            return count == 0 ? 0 : seconds / count * 1e6;
        }
    }

    /** The node's own counters that are not zero, one "name{tags} value" a line: what a failure report shows. */
    public String counted() {
        StringBuilder lines = new StringBuilder();
        for (Pagewire.Stat stat : stats) {
            if (stat.counter() && stat.value() != 0 && stat.name().startsWith("pagewire_")) {
                lines.append(stat.name()).append(stat.tags().isEmpty() ? "" : stat.tags().toString()).append(' ')
                        .append(stat.value() == Math.rint(stat.value()) ? String.valueOf((long) stat.value()) : String.valueOf(stat.value()))
                        .append('\n');
            }
        }
        return lines.toString();
    }

    private static boolean matches(Map<String, String> have, String[] want) {
        for (String tag : want) {
            int eq = tag.indexOf('=');
            if (!tag.substring(eq + 1).equals(have.get(tag.substring(0, eq)))) {
                return false;
            }
        }
        return true;
    }
}
