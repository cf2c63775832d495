package io.pagewire.tools.experiment;

import io.pagewire.client.Pagewire;
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
