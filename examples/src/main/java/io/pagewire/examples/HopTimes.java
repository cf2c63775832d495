package io.pagewire.examples;

import java.util.Arrays;

/** The hop times of a ring run, kept as they are taken: what {@link NotifyRing.Result} reports. */
final class HopTimes {
    private double[] micros = new double[64];
    private int hops;

    /** One hop that began at {@code startNs} ({@link System#nanoTime}) ended now. */
    void hopEnded(long startNs) {
        if (hops == micros.length) {
            micros = Arrays.copyOf(micros, hops * 2);
        }
        micros[hops++] = (System.nanoTime() - startNs) / 1e3;
    }

    NotifyRing.Result result(int members, int rounds) {
        double[] sorted = Arrays.copyOf(micros, hops);
        Arrays.sort(sorted);
        return new NotifyRing.Result(members, rounds, hops, hops == 0 ? 0 : Arrays.stream(sorted).sum() / hops,
                hops == 0 ? 0 : sorted[hops / 2], hops == 0 ? 0 : sorted[hops - 1]);
    }
}
