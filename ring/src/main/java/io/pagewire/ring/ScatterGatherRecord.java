package io.pagewire.ring;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * The records that carry a scatter/gather list on a session's request ring: one work request
 * ({@link #POST_TYPE}) or one receive ({@link #RECEIVE_TYPE}) followed by its elements. Requests with
 * one element (most of them) travel in {@link PostRecord} and {@link PostReceiveRecord}, whose entries
 * have a fixed size; one with several goes alone in a record of this kind, in posting order with the
 * rest of the ring. Fields are in the host's byte order.
 *
 * <pre>
 *   0                   4                   8                   12                  16
 *   +-------------------+-------------------+-------------------+-------------------+
 *   | queue pair number | shared receive    | element count     | (zero)            |   header
 *   |                   | queue id (receive)|                   |                   |
 *   +-------------------+-------------------+-------------------+-------------------+
 *   | the work request (72 bytes, as in a POST) or the receive (24 bytes, as in a    |
 *   | POST_RECEIVE); its lkey, local address and length are unused                  |
 *   +-------------------------------------------------------------------------------+
 *   | element count elements, 16 bytes each                                         |
 *   +-------------------------------------------------------------------------------+
 *
 *   element:
 *   0                   4                   8                                      16
 *   +-------------------+-------------------+---------------------------------------+
 *   | lkey              | length            | address                               |
 *   +-------------------+-------------------+---------------------------------------+
 * </pre>
 */
public final class ScatterGatherRecord {
    /** A work request with its gather (SEND, WRITE) or scatter (READ, atomic result) list (after POST 1, POST_RECEIVE 2, FAULT 3). */
    public static final int POST_TYPE = 4;
    /** A receive with its scatter list. */
    public static final int RECEIVE_TYPE = 5;
    public static final int HEADER_BYTES = 16;
    public static final int ELEMENT_BYTES = 16;
    /** The most elements a record carries: the device's max_sge. */
    public static final int MAX_ELEMENTS = 32;

    private static final int QPN = 0;
    private static final int SRQ_ID = 4;
    private static final int COUNT = 8;
    private static final int LKEY = 0;
    private static final int LENGTH = 4;
    private static final int ADDRESS = 8;

    private ScatterGatherRecord() {
    }

    /** The bytes of the work request or receive a record of {@code type} carries. */
    private static int bodyBytes(int type) {
        return type == POST_TYPE ? PostRecord.WORK_REQUEST_BYTES : PostReceiveRecord.RECEIVE_BYTES;
    }

    /** The length of a record of {@code type} with {@code elements} elements. */
    public static int length(int type, int elements) {
        return HEADER_BYTES + bodyBytes(type) + elements * ELEMENT_BYTES;
    }

    public static void putHeader(MutableDirectBuffer b, int record, int qpn, int srqId, int elements) {
        b.putInt(record + QPN, qpn);
        b.putInt(record + SRQ_ID, srqId);
        b.putInt(record + COUNT, elements);
        b.putInt(record + COUNT + 4, 0);
    }

    /** Where the record's work request or receive starts (read and written with PostRecord's or PostReceiveRecord's accessors). */
    public static int body(int record) {
        return record + HEADER_BYTES;
    }

    /** Where element {@code i} of a record of {@code type} starts. */
    public static int element(int type, int record, int i) {
        return record + HEADER_BYTES + bodyBytes(type) + i * ELEMENT_BYTES;
    }

    public static void putElement(MutableDirectBuffer b, int at, int lkey, long address, int length) {
        b.putInt(at + LKEY, lkey);
        b.putInt(at + LENGTH, length);
        b.putLong(at + ADDRESS, address);
    }

    /** Whether a record of {@code type} and {@code length} bytes is whole: a header, a body and the elements it counts. */
    public static boolean isWellFormed(DirectBuffer b, int type, int record, int length) {
        if ((type != POST_TYPE && type != RECEIVE_TYPE) || length < HEADER_BYTES) {
            return false;
        }
        int count = b.getInt(record + COUNT);
        return count >= 0 && count <= MAX_ELEMENTS && length == length(type, count);
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

    public static int lkey(DirectBuffer b, int element) {
        return b.getInt(element + LKEY);
    }

    public static int length(DirectBuffer b, int element) {
        return b.getInt(element + LENGTH);
    }

    public static long address(DirectBuffer b, int element) {
        return b.getLong(element + ADDRESS);
    }
}
