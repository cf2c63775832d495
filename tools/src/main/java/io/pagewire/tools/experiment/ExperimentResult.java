package io.pagewire.tools.experiment;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * What an experiment measured: a table (one row per configuration it ran), the series of its plot,
 * and its claims.
 *
 * @param columns the table's column names
 * @param rows the table's rows, each as long as {@code columns}
 * @param plot the figure to draw: its title, axis titles and series
 * @param claims the paper's claims, each judged
 */
public record ExperimentResult(List<String> columns, List<List<Object>> rows, Plot plot, List<Claim> claims) {
    public ExperimentResult {
        for (List<Object> row : rows) {
            if (row.size() != columns.size()) {
                throw new IllegalArgumentException("a row has " + row.size() + " values for " + columns.size() + " columns: " + row);
            }
        }
    }

    /** Whether every claim was reproduced. */
    public boolean allReproduced() {
        return claims.stream().allMatch(Claim::reproduced);
    }

    /**
     * A line plot, each series mapping x to y in x's order; or, with {@code categories}, a bar chart
     * whose series give one y per category (their x values are ignored).
     *
     * @param logX whether the x axis is logarithmic (sizes that double)
     * @param categories the bars' labels, or null for a line plot
     */
    public record Plot(String title, String xTitle, String yTitle, boolean logX, Map<String, double[][]> series, List<String> categories) {
        /** A line plot. */
        public Plot(String title, String xTitle, String yTitle, boolean logX, Map<String, double[][]> series) {
            this(title, xTitle, yTitle, logX, series, null);
        }

        /** Adds the point (x, y) to the end of the series {@code name} of {@code series}, starting it if new. */
        public static void addPoint(Map<String, double[][]> series, String name, double x, double y) {
            double[][] xy = series.computeIfAbsent(name, k -> new double[2][0]);
            xy[0] = Arrays.copyOf(xy[0], xy[0].length + 1);
            xy[1] = Arrays.copyOf(xy[1], xy[1].length + 1);
            xy[0][xy[0].length - 1] = x;
            xy[1][xy[1].length - 1] = y;
        }
    }
}
