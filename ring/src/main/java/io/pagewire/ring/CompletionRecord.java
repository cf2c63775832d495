package io.pagewire.ring;

import java.nio.charset.StandardCharsets;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A COMPLETION record on a session's event ring: how one work request or posted receive ended,
 * written by the node and read by the application. Opcodes and statuses are the numbers of
 * {@code verbs.proto}'s enums; the error is UTF-8, empty on success.
 *
 * <pre>
 *   0                                       8                   12                  16
 *   +---------------------------------------+-------------------+-------------------+
 *   | work request id                       | queue pair number | opcode            |
 *   +---------------------------------------+-------------------+-------------------+
 *  16                  20                  24                                      32
 *   | status            | error length      | bytes                                 |
 *   +-------------------+-------------------+---------------------------------------+
 *  32                                      40                  44                  48
 *   | value (FETCH_ADD, COMPARE_SWAP; source)| flags            | immediate         |
 *   +---------------------------------------+-------------------+-------------------+
 *  48                                      56
 *   | time (ns, CLOCK_MONOTONIC)            |
 *   +---------------------------------------+
 *  56
 *   | error (error length bytes)            ...
 *   +----------------------------------------
 *
 *   flags: bit 0 ({@link #HAS_IMMEDIATE_FLAG}) set when the completion carries immediate data, bit 1
 *   ({@link #SOLICITED_FLAG}) when its sender asked for a solicited event, bit 2 ({@link #INVALIDATED_FLAG})
 *   when its SEND_WITH_INVALIDATE invalidated the window whose rkey the immediate holds, bit 3
 *   ({@link #DATAGRAM_FLAG}) when it is a UD receive, whose value is then its source (the sender's QPN
 *   in the low 32 bits, its LID in the next 16), bit 4 ({@link #GLOBAL_ROUTE_FLAG}) when that receive's
 *   first 40 bytes hold a GRH. time: when the node put the
 *   completion on the ring, in the host's monotonic clock (an extended CQ's completion timestamp).
 * </pre>
 */
public final class CompletionRecord {
    /** The record's type on the event ring. */
    public static final int TYPE = 1;
    public static final int FIXED_BYTES = 56;
    /** In a completion's flags: it carries immediate data. */
    public static final int HAS_IMMEDIATE_FLAG = 1;
    /** In a completion's flags: its sender asked for a solicited event (IBV_SEND_SOLICITED). */
    public static final int SOLICITED_FLAG = 2;
    /** In a completion's flags: its SEND_WITH_INVALIDATE invalidated the window whose rkey the immediate holds. */
    public static final int INVALIDATED_FLAG = 4;
    /** In a completion's flags: a UD receive, whose value holds its source (QPN, and LID << 32). */
    public static final int DATAGRAM_FLAG = 8;
    /** In a completion's flags: the UD receive's first 40 bytes hold a GRH (IBV_WC_GRH). */
    public static final int GLOBAL_ROUTE_FLAG = 16;

    private static final int WR_ID = 0;
    private static final int QPN = 8;
    private static final int OPCODE = 12;
    private static final int STATUS = 16;
    private static final int ERROR_LENGTH = 20;
    private static final int BYTES = 24;
    private static final int VALUE = 32;
    private static final int FLAGS = 40;
    private static final int IMMEDIATE = 44;
    private static final int TIME = 48;

    private CompletionRecord() {
    }

    /** The length of a record carrying an error of {@code errorBytes} bytes. */
    public static int length(int errorBytes) {
        return FIXED_BYTES + errorBytes;
    }

    public static void put(MutableDirectBuffer b, int record, long wrId, int qpn, int opcode, int status, long bytes, long value,
            boolean hasImmediate, int immediate, byte[] error) {
        put(b, record, wrId, qpn, opcode, status, bytes, value, hasImmediate ? HAS_IMMEDIATE_FLAG : 0, immediate, 0, error);
    }

    /** Writes a completion with {@code flags} a combination of the *_FLAG bits, handed over at {@code timeNs} (System.nanoTime). */
    public static void put(MutableDirectBuffer b, int record, long wrId, int qpn, int opcode, int status, long bytes, long value,
            int flags, int immediate, long timeNs, byte[] error) {
        b.putLong(record + WR_ID, wrId);
        b.putInt(record + QPN, qpn);
        b.putInt(record + OPCODE, opcode);
        b.putInt(record + STATUS, status);
        b.putInt(record + ERROR_LENGTH, error.length);
        b.putLong(record + BYTES, bytes);
        b.putLong(record + VALUE, value);
        b.putInt(record + FLAGS, flags & (HAS_IMMEDIATE_FLAG | SOLICITED_FLAG | INVALIDATED_FLAG | DATAGRAM_FLAG | GLOBAL_ROUTE_FLAG));
        b.putInt(record + IMMEDIATE, immediate);
        b.putLong(record + TIME, timeNs);
        b.putBytes(record + FIXED_BYTES, error);
    }

    public static long wrId(DirectBuffer b, int record) {
        return b.getLong(record + WR_ID);
    }

    public static int qpn(DirectBuffer b, int record) {
        return b.getInt(record + QPN);
    }

    public static int opcode(DirectBuffer b, int record) {
        return b.getInt(record + OPCODE);
    }

    public static int status(DirectBuffer b, int record) {
        return b.getInt(record + STATUS);
    }

    public static long bytes(DirectBuffer b, int record) {
        return b.getLong(record + BYTES);
    }

    public static long value(DirectBuffer b, int record) {
        return b.getLong(record + VALUE);
    }

    public static boolean hasImmediate(DirectBuffer b, int record) {
        return (b.getInt(record + FLAGS) & HAS_IMMEDIATE_FLAG) != 0;
    }

    public static boolean solicited(DirectBuffer b, int record) {
        return (b.getInt(record + FLAGS) & SOLICITED_FLAG) != 0;
    }

    /** Whether the completion is a UD receive, whose value holds its source. */
    public static boolean datagram(DirectBuffer b, int record) {
        return (b.getInt(record + FLAGS) & DATAGRAM_FLAG) != 0;
    }

    /** Whether the UD receive's first 40 bytes hold a GRH. */
    public static boolean globalRoute(DirectBuffer b, int record) {
        return (b.getInt(record + FLAGS) & GLOBAL_ROUTE_FLAG) != 0;
    }

    public static long timeNs(DirectBuffer b, int record) {
        return b.getLong(record + TIME);
    }

    public static int immediate(DirectBuffer b, int record) {
        return b.getInt(record + IMMEDIATE);
    }

    /** The error, or null on success (or for a record too short to hold what its length field says). */
    public static String error(DirectBuffer b, int record, int length) {
        int errorLength = b.getInt(record + ERROR_LENGTH);
        if (errorLength <= 0 || errorLength > length - FIXED_BYTES) {
            return null;
        }
        return b.getStringWithoutLengthUtf8(record + FIXED_BYTES, errorLength);
    }

    /** A text as a record carries it. */
    public static byte[] utf8(String text) {
        return text == null ? EMPTY : text.getBytes(StandardCharsets.UTF_8);
    }

    static final byte[] EMPTY = new byte[0];
}
