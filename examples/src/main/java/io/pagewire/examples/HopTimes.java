package io.pagewire.examples;

/** The hop times of a ring run, summed as they are taken: what {@link NotifyRing.Result} reports. */
final class HopTimes {
    private long hops;
    private double totalMicros;
    private double maxMicros;

    /** One hop that began at {@code startNs} ({@link System#nanoTime}) ended now. */
    void hopEnded(long startNs) {
        double micros = (System.nanoTime() - startNs) / 1e3;
        totalMicros += micros;
        maxMicros = Math.max(maxMicros, micros);
        hops++;
    }

    NotifyRing.Result result(int members, int rounds) {
        return new NotifyRing.Result(members, rounds, hops, hops == 0 ? 0 : totalMicros / hops, maxMicros);
    }
}
