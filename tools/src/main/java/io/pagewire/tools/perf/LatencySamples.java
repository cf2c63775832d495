package io.pagewire.tools.perf;

import java.io.IOException;
import java.io.Writer;
import org.agrona.collections.IntArrayList;
import org.agrona.collections.LongArrayList;

/**
 * Every measured round trip of a latency test in the order it was taken, for {@code pagewire perf
 * --samples}: what perftest's {@code --report-unsorted} prints, plus when each one started, so that a
 * slow round trip can be laid beside what the machine did at that moment. Start times are the JVM's
 * {@code System.nanoTime()}, which on Linux is {@code CLOCK_MONOTONIC}: the clock that {@code perf
 * sched record -k CLOCK_MONOTONIC} stamps scheduler events with.
 *
 * <p>Recording stores three primitives and allocates nothing once {@link #reserve} made room, so it does
 * not disturb what it records. Used by one measuring thread at a time.
 */
public final class LatencySamples {
    static final String HEADER = "bytes,start_ns,elapsed_ns";

    private final IntArrayList bytes = new IntArrayList();
    private final LongArrayList startsNs = new LongArrayList();
    private final LongArrayList elapsedNs = new LongArrayList();

    /** Makes room for {@code count} more samples, before they are measured. */
    void reserve(long count) {
        long needed = startsNs.size() + count;
        if (needed > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("--samples keeps at most " + (Integer.MAX_VALUE - 8) + " round trips, asked for " + needed);
        }
        bytes.ensureCapacity((int) needed);
        startsNs.ensureCapacity((int) needed);
        elapsedNs.ensureCapacity((int) needed);
    }

    /** One measured round trip of a {@code size}-byte message that started at {@code startNs} and took {@code elapsed} ns. */
    void add(int size, long startNs, long elapsed) {
        bytes.addInt(size);
        startsNs.addLong(startNs);
        elapsedNs.addLong(elapsed);
    }

    /**
     * Writes the samples as CSV under {@link #HEADER}: a ping-pong's elapsed time is its whole round
     * trip (the table halves it, as perftest does), a READ's or an atomic's is the request's.
     */
    public void writeCsv(Writer out) throws IOException {
        out.write(HEADER);
        out.write('\n');
        writeRows(out, "");
        out.flush();
    }

    /** Writes the samples as CSV rows under {@link #HEADER}, each after {@code prefix} (columns of the caller's, ending in a comma, or empty). */
    void writeRows(Writer out, String prefix) throws IOException {
        StringBuilder line = new StringBuilder(64);
        for (int i = 0; i < startsNs.size(); i++) {
            line.setLength(0);
            line.append(prefix).append(bytes.getInt(i)).append(',').append(startsNs.getLong(i)).append(',').append(elapsedNs.getLong(i))
                    .append('\n');
            out.append(line);
        }
    }
}
