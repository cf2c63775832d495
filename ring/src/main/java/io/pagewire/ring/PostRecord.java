package io.pagewire.ring;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A POST record on a session's request ring: work requests for one queue pair, written by the
 * application and read (and validated) by the node. Fields are in the host's byte order (both sides are on one host); opcodes are the
 * numbers of {@code verbs.proto}'s {@code WorkRequest.Opcode}.
 *
 * <pre>
 *   0                   4                   8
 *   +-------------------+-------------------+
 *   | queue pair number | count             |   header
 *   +-------------------+-------------------+
 *   | count work requests, 72 bytes each    |
 *   +---------------------------------------+
 *
 *   work request:
 *   0                                       8                   12                  16
 *   +---------------------------------------+-------------------+-------------------+
 *   | work request id                       | opcode | flags    | lkey              |
 *   +---------------------------------------+-------------------+-------------------+
 *  16                                      24                  28                  32
 *   | local address                         | length            | event counter id  |
 *   +---------------------------------------+-------------------+-------------------+
 *  32                                      40                                      48
 *   | remote address                        | rkey                                  |
 *   +---------------------------------------+---------------------------------------+
 *  48                                      56                  60                  64
 *   | add (FETCH_ADD) or compare (COMPARE_SWAP) | immediate     | (zero)            |
 *   +---------------------------------------+-------------------+-------------------+
 *  64                                      72
 *   | swap (COMPARE_SWAP)                   |
 *   +---------------------------------------+
 *
 *   opcode | flags: the opcode in the low 16 bits; bit 16 ({@link #UNSIGNALED_FLAG}) set when the
 *   request completes silently on success, bit 17 ({@link #FENCE_FLAG}) when it waits for the READs and
 *   atomics before it, bit 18 ({@link #SOLICITED_FLAG}) when its receive completion is a solicited event,
 *   bit 19 ({@link #DATAGRAM_FLAG}) when it is a UD SEND: its remote address then holds the address
 *   handle's LID (low 16 bits) and, in bit 16, whether the handle is global; its rkey the remote QPN
 *   (low 32 bits) and Q_Key (high 32).
 *   A request with lkey 0 and length 0 has no local memory (no scatter/gather element); one with
 *   several elements goes alone in a {@link ScatterGatherRecord}.
 * </pre>
 */
public final class PostRecord {
    /** The record's type on the request ring. */
    public static final int TYPE = 1;
    public static final int HEADER_BYTES = 8;
    public static final int WORK_REQUEST_BYTES = 72;
    /** In a work request's opcode word: it completes silently when it succeeds. */
    public static final int UNSIGNALED_FLAG = 1 << 16;
    /** In a work request's opcode word: it waits for every READ and atomic posted before it (IBV_SEND_FENCE). */
    public static final int FENCE_FLAG = 1 << 17;
    /** In a work request's opcode word: its receive completion is a solicited event (IBV_SEND_SOLICITED). */
    public static final int SOLICITED_FLAG = 1 << 18;
    /** In a work request's opcode word: a UD SEND, addressed by its remote address and rkey fields. */
    public static final int DATAGRAM_FLAG = 1 << 19;

    private static final int QPN = 0;
    private static final int COUNT = 4;
    private static final int WR_ID = 0;
    private static final int OPCODE_AND_FLAGS = 8;
    private static final int LKEY = 12;
    private static final int LOCAL_ADDRESS = 16;
    private static final int LENGTH = 24;
    private static final int COUNTER_ID = 28;
    private static final int REMOTE_ADDRESS = 32;
    private static final int RKEY = 40;
    private static final int ADD = 48;
    private static final int IMMEDIATE = 56;
    private static final int SWAP = 64;

    private PostRecord() {
    }

    /** The length of a record of {@code count} work requests. */
    public static int length(int count) {
        return HEADER_BYTES + count * WORK_REQUEST_BYTES;
    }

    /** How many work requests fit a record of at most {@code maxLength} bytes. */
    public static int capacity(int maxLength) {
        return (maxLength - HEADER_BYTES) / WORK_REQUEST_BYTES;
    }

    public static void putHeader(MutableDirectBuffer b, int record, int qpn, int count) {
        b.putInt(record + QPN, qpn);
        b.putInt(record + COUNT, count);
    }

    /** Writes work request {@code i} of the record at {@code record}. */
    public static void putWorkRequest(MutableDirectBuffer b, int record, int i, long wrId, int opcode, boolean signaled, int lkey,
            long localAddress, int length, int counterId, long remoteAddress, long rkey, long add, int immediate, long swap) {
        putWorkRequestAt(b, workRequest(record, i), wrId, opcode, signaled ? 0 : UNSIGNALED_FLAG, lkey, localAddress, length, counterId,
                remoteAddress, rkey, add, immediate, swap);
    }

    /** Writes a work request at {@code at}, with {@code flags} a combination of the *_FLAG bits. */
    public static void putWorkRequestAt(MutableDirectBuffer b, int at, long wrId, int opcode, int flags, int lkey,
            long localAddress, int length, int counterId, long remoteAddress, long rkey, long add, int immediate, long swap) {
        b.putLong(at + WR_ID, wrId);
        b.putInt(at + OPCODE_AND_FLAGS, (opcode & 0xFFFF) | (flags & (UNSIGNALED_FLAG | FENCE_FLAG | SOLICITED_FLAG | DATAGRAM_FLAG)));
        b.putInt(at + LKEY, lkey);
        b.putLong(at + LOCAL_ADDRESS, localAddress);
        b.putInt(at + LENGTH, length);
        b.putInt(at + COUNTER_ID, counterId);
        b.putLong(at + REMOTE_ADDRESS, remoteAddress);
        b.putLong(at + RKEY, rkey);
        b.putLong(at + ADD, add);
        b.putInt(at + IMMEDIATE, immediate);
        b.putInt(at + IMMEDIATE + 4, 0);
        b.putLong(at + SWAP, swap);
    }

    /** Whether a record of {@code length} bytes is a whole POST: a header and the count of work requests it says. */
    public static boolean isWellFormed(DirectBuffer b, int record, int length) {
        if (length < HEADER_BYTES) {
            return false;
        }
        int count = b.getInt(record + COUNT);
        return count >= 0 && count <= (length - HEADER_BYTES) / WORK_REQUEST_BYTES && length == length(count);
    }

    public static int qpn(DirectBuffer b, int record) {
        return b.getInt(record + QPN);
    }

    public static int count(DirectBuffer b, int record) {
        return b.getInt(record + COUNT);
    }

    /** Where work request {@code i} of the record at {@code record} starts. */
    public static int workRequest(int record, int i) {
        return record + HEADER_BYTES + i * WORK_REQUEST_BYTES;
    }

    public static long wrId(DirectBuffer b, int wr) {
        return b.getLong(wr + WR_ID);
    }

    public static int opcode(DirectBuffer b, int wr) {
        return b.getInt(wr + OPCODE_AND_FLAGS) & 0xFFFF;
    }

    public static boolean signaled(DirectBuffer b, int wr) {
        return (b.getInt(wr + OPCODE_AND_FLAGS) & UNSIGNALED_FLAG) == 0;
    }

    public static boolean fence(DirectBuffer b, int wr) {
        return (b.getInt(wr + OPCODE_AND_FLAGS) & FENCE_FLAG) != 0;
    }

    public static boolean datagram(DirectBuffer b, int wr) {
        return (b.getInt(wr + OPCODE_AND_FLAGS) & DATAGRAM_FLAG) != 0;
    }

    public static boolean solicited(DirectBuffer b, int wr) {
        return (b.getInt(wr + OPCODE_AND_FLAGS) & SOLICITED_FLAG) != 0;
    }

    public static int lkey(DirectBuffer b, int wr) {
        return b.getInt(wr + LKEY);
    }

    public static long localAddress(DirectBuffer b, int wr) {
        return b.getLong(wr + LOCAL_ADDRESS);
    }

    public static int length(DirectBuffer b, int wr) {
        return b.getInt(wr + LENGTH);
    }

    public static int counterId(DirectBuffer b, int wr) {
        return b.getInt(wr + COUNTER_ID);
    }

    public static long remoteAddress(DirectBuffer b, int wr) {
        return b.getLong(wr + REMOTE_ADDRESS);
    }

    public static long rkey(DirectBuffer b, int wr) {
        return b.getLong(wr + RKEY);
    }

    public static long add(DirectBuffer b, int wr) {
        return b.getLong(wr + ADD);
    }

    public static int immediate(DirectBuffer b, int wr) {
        return b.getInt(wr + IMMEDIATE);
    }

    public static long swap(DirectBuffer b, int wr) {
        return b.getLong(wr + SWAP);
    }
}
