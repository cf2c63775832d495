package io.pagewire.tools.experiment;

import java.io.IOException;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/** Writes an experiment's result: a table on the terminal, a CSV and a PNG plot, and one line per claim. */
public final class ExperimentReport {
    private ExperimentReport() {
    }

    /** Prints the table and the claims, and writes {@code NAME.csv} and {@code NAME.png} into {@code directory}. */
    public static void write(Experiment experiment, ExperimentResult result, Path directory, PrintWriter out) throws IOException {
        out.println();
        out.println(table(result));
        Files.createDirectories(directory);
        Path csv = directory.resolve(experiment.name() + ".csv");
        Files.writeString(csv, csv(result), StandardCharsets.UTF_8);
        Path png = directory.resolve(experiment.name() + ".png");
        plot(result.plot(), png);
        out.println("wrote " + csv + " and " + png);
        out.println();
        out.println("The paper: " + experiment.paper());
        for (Claim claim : result.claims()) {
            out.println(claim.line());
        }
        out.flush();
    }

    /** The table as aligned columns (also valid markdown). */
    public static String table(ExperimentResult result) {
        List<String[]> cells = new ArrayList<>();
        cells.add(result.columns().toArray(String[]::new));
        for (List<Object> row : result.rows()) {
            cells.add(row.stream().map(ExperimentReport::format).toArray(String[]::new));
        }
        int[] widths = new int[result.columns().size()];
        for (String[] row : cells) {
            for (int i = 0; i < row.length; i++) {
                widths[i] = Math.max(widths[i], row[i].length());
            }
        }
        StringBuilder out = new StringBuilder();
        for (int r = 0; r < cells.size(); r++) {
            out.append('|');
            for (int i = 0; i < widths.length; i++) {
                out.append(' ').append(pad(cells.get(r)[i], widths[i])).append(" |");
            }
            out.append('\n');
            if (r == 0) {
                out.append('|');
                for (int width : widths) {
                    out.append("-".repeat(width + 2)).append('|');
                }
                out.append('\n');
            }
        }
        return out.toString();
    }

    static String csv(ExperimentResult result) {
        StringBuilder out = new StringBuilder(String.join(",", result.columns())).append('\n');
        for (List<Object> row : result.rows()) {
            List<String> values = new ArrayList<>();
            for (Object value : row) {
                values.add(value instanceof Double d ? Double.toString(d) : String.valueOf(value));
            }
            out.append(String.join(",", values)).append('\n');
        }
        return out.toString();
    }

    static void plot(ExperimentResult.Plot plot, Path png) throws IOException {
        System.setProperty("java.awt.headless", "true");
        if (plot.categories() != null) {
            CategoryChart bars = new CategoryChartBuilder().width(1000).height(600).title(plot.title()).xAxisTitle(plot.xTitle())
                    .yAxisTitle(plot.yTitle()).build();
            bars.getStyler().setLegendPosition(Styler.LegendPosition.InsideNE);
            bars.getStyler().setXAxisLabelRotation(20);
            for (Map.Entry<String, double[][]> series : plot.series().entrySet()) {
                List<Double> values = new ArrayList<>();
                for (double value : series.getValue()[1]) {
                    values.add(value);
                }
                bars.addSeries(series.getKey(), plot.categories(), values);
            }
            BitmapEncoder.saveBitmap(bars, png.toString(), BitmapEncoder.BitmapFormat.PNG);
            return;
        }
        XYChart chart = new XYChartBuilder().width(1000).height(600).title(plot.title()).xAxisTitle(plot.xTitle()).yAxisTitle(plot.yTitle()).build();
        chart.getStyler().setXAxisLogarithmic(plot.logX());
        chart.getStyler().setLegendPosition(Styler.LegendPosition.OutsideE);
        for (Map.Entry<String, double[][]> series : plot.series().entrySet()) {
            chart.addSeries(series.getKey(), series.getValue()[0], series.getValue()[1]).setMarker(SeriesMarkers.CIRCLE);
        }
        BitmapEncoder.saveBitmap(chart, png.toString(), BitmapEncoder.BitmapFormat.PNG);
    }

    private static String format(Object value) {
        if (value instanceof Double d) {
            return Math.abs(d) >= 100 ? String.format(Locale.ROOT, "%.0f", d) : String.format(Locale.ROOT, "%.3g", d);
        }
        return String.valueOf(value);
    }

    private static String pad(String value, int width) {
        return value + " ".repeat(width - value.length());
    }
}
