package io.pagewire.ring;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A REFUSED record on a session's event ring: a posted work request or receive the node would not
 * take, with why (a gRPC status code: invalid, or beyond a limit) and the reason in UTF-8. Written by
 * the node, read by the application, which completes the request with the error.
 *
 * <pre>
 *   0                                       8                   12                  16
 *   +---------------------------------------+-------------------+-------------------+
 *   | work request id                       | queue pair number | status code       |
 *   +-------------------+-------------------+-------------------+-------------------+
 *  16                  20                  24
 *   | error length      | (zero)            | error (error length bytes)            ...
 *   +-------------------+-------------------+----------------------------------------
 *
 *   status code: gRPC's: 3 INVALID_ARGUMENT (a bad key, range, length or opcode), 9 FAILED_PRECONDITION
 *   (the queue pair's state), 8 RESOURCE_EXHAUSTED (a full queue, a quota, the caller's share of a pool).
 * </pre>
 */
public final class RefusedRecord {
    /** The record's type on the event ring. */
    public static final int TYPE = 2;
    public static final int FIXED_BYTES = 24;
    /** gRPC's INVALID_ARGUMENT: what a record without a known code means. */
    public static final int INVALID_ARGUMENT = 3;
    /** gRPC's RESOURCE_EXHAUSTED. */
    public static final int RESOURCE_EXHAUSTED = 8;

    private static final int WR_ID = 0;
    private static final int QPN = 8;
    private static final int STATUS = 12;
    private static final int ERROR_LENGTH = 16;

    private RefusedRecord() {
    }

    public static int length(int errorBytes) {
        return FIXED_BYTES + errorBytes;
    }

    public static void put(MutableDirectBuffer b, int record, long wrId, int qpn, int status, byte[] error) {
        b.putLong(record + WR_ID, wrId);
        b.putInt(record + QPN, qpn);
        b.putInt(record + STATUS, status);
        b.putInt(record + ERROR_LENGTH, error.length);
        b.putInt(record + ERROR_LENGTH + 4, 0);
        b.putBytes(record + FIXED_BYTES, error);
    }

    /** The gRPC status code of the refusal. */
    public static int status(DirectBuffer b, int record) {
        return b.getInt(record + STATUS);
    }

    public static long wrId(DirectBuffer b, int record) {
        return b.getLong(record + WR_ID);
    }

    public static int qpn(DirectBuffer b, int record) {
        return b.getInt(record + QPN);
    }

    /** The reason, or "" for a record too short to hold what its length field says. */
    public static String error(DirectBuffer b, int record, int length) {
        int errorLength = b.getInt(record + ERROR_LENGTH);
        if (errorLength <= 0 || errorLength > length - FIXED_BYTES) {
            return "";
        }
        return b.getStringWithoutLengthUtf8(record + FIXED_BYTES, errorLength);
    }
}
