package io.pagewire.ring;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A CPU_UNMAP record on a session's event ring: the node's kernel wants the frames of pages the
 * application maps in its own page tables (the C verbs library maps them at the program's addresses).
 * The application unmaps them (a later touch faults and maps them again) and then says so with a
 * MapCpuPages release; until then reclaim leaves them alone.
 *
 * <pre>
 *   0                                       8                                      16
 *   +---------------------------------------+---------------------------------------+
 *   | address (page-aligned)                | length (whole pages)                  |
 *   +---------------------------------------+---------------------------------------+
 * </pre>
 */
public final class CpuUnmapRecord {
    /** The record's type on the event ring. */
    public static final int TYPE = 5;
    public static final int LENGTH = 16;

    private static final int ADDRESS = 0;
    private static final int PAGES_LENGTH = 8;

    private CpuUnmapRecord() {
    }

    public static void put(MutableDirectBuffer b, int record, long address, long length) {
        b.putLong(record + ADDRESS, address);
        b.putLong(record + PAGES_LENGTH, length);
    }

    public static long address(DirectBuffer b, int record) {
        return b.getLong(record + ADDRESS);
    }

    public static long length(DirectBuffer b, int record) {
        return b.getLong(record + PAGES_LENGTH);
    }
}
