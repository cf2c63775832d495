package io.pagewire.ring;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A POST_RECEIVE record on a session's request ring: receive buffers for a queue pair, or for a
 * shared receive queue, written by the application and read (and validated) by the node.
 *
 * <pre>
 *   0                   4                   8                   12                  16
 *   +-------------------+-------------------+-------------------+-------------------+
 *   | queue pair number | shared receive    | count             | (zero)            |   header
 *   |                   | queue id (0: the  |                   |                   |
 *   |                   | pair's own queue) |                   |                   |
 *   +-------------------+-------------------+-------------------+-------------------+
 *   | count receives, 24 bytes each                                                 |
 *   +-------------------------------------------------------------------------------+
 *
 *   receive:
 *   0                                       8                   12                  16
 *   +---------------------------------------+-------------------+-------------------+
 *   | work request id                       | lkey              | length            |
 *   +---------------------------------------+-------------------+-------------------+
 *  16                                      24
 *   | address                               |
 *   +---------------------------------------+
 * </pre>
 */
public final class PostReceiveRecord {
    /** The record's type on the request ring. */
    public static final int TYPE = 2;
    public static final int HEADER_BYTES = 16;
    public static final int RECEIVE_BYTES = 24;

    private static final int QPN = 0;
    private static final int SRQ_ID = 4;
    private static final int COUNT = 8;
    private static final int WR_ID = 0;
    private static final int LKEY = 8;
    private static final int LENGTH = 12;
    private static final int ADDRESS = 16;

    private PostReceiveRecord() {
    }

    /** The length of a record of {@code count} receives. */
    public static int length(int count) {
        return HEADER_BYTES + count * RECEIVE_BYTES;
    }

    public static void putHeader(MutableDirectBuffer b, int record, int qpn, int srqId, int count) {
        b.putInt(record + QPN, qpn);
        b.putInt(record + SRQ_ID, srqId);
        b.putInt(record + COUNT, count);
        b.putInt(record + COUNT + 4, 0);
    }

    /** Writes receive {@code i} of the record at {@code record}. */
    public static void putReceive(MutableDirectBuffer b, int record, int i, long wrId, int lkey, long address, int length) {
        putReceiveAt(b, receive(record, i), wrId, lkey, address, length);
    }

    /** Writes a receive at {@code at}. */
    public static void putReceiveAt(MutableDirectBuffer b, int at, long wrId, int lkey, long address, int length) {
        b.putLong(at + WR_ID, wrId);
        b.putInt(at + LKEY, lkey);
        b.putInt(at + LENGTH, length);
        b.putLong(at + ADDRESS, address);
    }

    /** Whether a record of {@code length} bytes is a whole POST_RECEIVE: a header and the count of receives it says. */
    public static boolean isWellFormed(DirectBuffer b, int record, int length) {
        if (length < HEADER_BYTES) {
            return false;
        }
        int count = b.getInt(record + COUNT);
        return count >= 0 && count <= (length - HEADER_BYTES) / RECEIVE_BYTES && length == length(count);
    }

    public static int qpn(DirectBuffer b, int record) {
        return b.getInt(record + QPN);
    }

    public static int srqId(DirectBuffer b, int record) {
        return b.getInt(record + SRQ_ID);
    }

    public static int count(DirectBuffer b, int record) {
        return b.getInt(record + COUNT);
    }

    /** Where receive {@code i} of the record at {@code record} starts. */
    public static int receive(int record, int i) {
        return record + HEADER_BYTES + i * RECEIVE_BYTES;
    }

    public static long wrId(DirectBuffer b, int receive) {
        return b.getLong(receive + WR_ID);
    }

    public static int lkey(DirectBuffer b, int receive) {
        return b.getInt(receive + LKEY);
    }

    public static int length(DirectBuffer b, int receive) {
        return b.getInt(receive + LENGTH);
    }

    public static long address(DirectBuffer b, int receive) {
        return b.getLong(receive + ADDRESS);
    }
}
