package io.pagewire.ring;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A COUNTER record on a session's event ring: an event counter the application watches reached a
 * new value. Written by the node, read by the application.
 *
 * <pre>
 *   0                   4                   8                                      16
 *   +-------------------+-------------------+---------------------------------------+
 *   | event counter id  | (zero)            | value                                 |
 *   +-------------------+-------------------+---------------------------------------+
 * </pre>
 */
public final class CounterRecord {
    /** The record's type on the event ring. */
    public static final int TYPE = 3;
    public static final int LENGTH = 16;

    private static final int COUNTER_ID = 0;
    private static final int VALUE = 8;

    private CounterRecord() {
    }

    public static void put(MutableDirectBuffer b, int record, int counterId, long value) {
        b.putInt(record + COUNTER_ID, counterId);
        b.putInt(record + COUNTER_ID + 4, 0);
        b.putLong(record + VALUE, value);
    }

    public static int counterId(DirectBuffer b, int record) {
        return b.getInt(record + COUNTER_ID);
    }

    public static long value(DirectBuffer b, int record) {
        return b.getLong(record + VALUE);
    }
}
