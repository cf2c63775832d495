package io.pagewire.ring;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A FAULT_SERVED record on a session's event ring: the kernel agent's answer to a {@link FaultRecord}
 * with the same token. An empty error means every page of the range was made resident (the CPU
 * looks at its page table again); otherwise the reason in UTF-8 (a bad address, memory exhausted).
 * Written by the node, read by the application.
 *
 * <pre>
 *   0                                       8                   12                  16
 *   +---------------------------------------+-------------------+-------------------+
 *   | token                                 | error length      | status            |
 *   +---------------------------------------+-------------------+-------------------+
 *  16
 *   | error (error length bytes)            ...
 *   +----------------------------------------
 *
 *   status: 0 when served, else the gRPC status code the same failure of a Load or Store call gets.
 * </pre>
 */
public final class FaultServedRecord {
    /** The record's type on the event ring. */
    public static final int TYPE = 4;
    public static final int FIXED_BYTES = 16;

    private static final int TOKEN = 0;
    private static final int ERROR_LENGTH = 8;
    private static final int STATUS = 12;

    private FaultServedRecord() {
    }

    public static int length(int errorBytes) {
        return FIXED_BYTES + errorBytes;
    }

    public static void put(MutableDirectBuffer b, int record, long token, int status, byte[] error) {
        b.putLong(record + TOKEN, token);
        b.putInt(record + ERROR_LENGTH, error.length);
        b.putInt(record + STATUS, status);
        b.putBytes(record + FIXED_BYTES, error);
    }

    public static long token(DirectBuffer b, int record) {
        return b.getLong(record + TOKEN);
    }

    /** 0 when the fault was served, else a gRPC status code. */
    public static int status(DirectBuffer b, int record) {
        return b.getInt(record + STATUS);
    }

    /** The reason, or "" when the fault was served (or the record is too short for its length field). */
    public static String error(DirectBuffer b, int record, int length) {
        int errorLength = b.getInt(record + ERROR_LENGTH);
        if (errorLength <= 0 || errorLength > length - FIXED_BYTES) {
            return "";
        }
        return b.getStringWithoutLengthUtf8(record + FIXED_BYTES, errorLength);
    }
}
