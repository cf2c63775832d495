package io.pagewire.ring;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * A FAULT record on a session's request ring: a CPU (an application thread that maps the node's
 * memory) found pages of [address, address + length) not resident and asks the kernel agent to bring
 * them in, as a page fault traps into a kernel. Written by the application, read (and validated) by
 * the node, which answers with a {@link FaultServedRecord} carrying the same token.
 *
 * <pre>
 *   0                                       8                                      16
 *   +---------------------------------------+---------------------------------------+
 *   | token                                 | address                               |
 *   +-------------------+-------------------+---------------------------------------+
 *  16                  20                  24
 *   | length            | flags             |
 *   +-------------------+-------------------+
 *
 *   flags: bit 0 set for a store (the pages are wanted writable), other bits zero.
 *   length: 1 to MAX_LENGTH bytes.
 * </pre>
 */
public final class FaultRecord {
    /** The record's type on the request ring. */
    public static final int TYPE = 3;
    public static final int LENGTH = 24;
    /** The most bytes one fault asks for: the node serves them page by page before it answers. */
    public static final int MAX_LENGTH = 1 << 20;
    public static final int WRITE = 1;

    private static final int TOKEN = 0;
    private static final int ADDRESS = 8;
    private static final int BYTES = 16;
    private static final int FLAGS = 20;

    private FaultRecord() {
    }

    public static void put(MutableDirectBuffer b, int record, long token, long address, int length, boolean write) {
        b.putLong(record + TOKEN, token);
        b.putLong(record + ADDRESS, address);
        b.putInt(record + BYTES, length);
        b.putInt(record + FLAGS, write ? WRITE : 0);
    }

    public static long token(DirectBuffer b, int record) {
        return b.getLong(record + TOKEN);
    }

    public static long address(DirectBuffer b, int record) {
        return b.getLong(record + ADDRESS);
    }

    public static int length(DirectBuffer b, int record) {
        return b.getInt(record + BYTES);
    }

    public static boolean write(DirectBuffer b, int record) {
        return (b.getInt(record + FLAGS) & WRITE) != 0;
    }
}
