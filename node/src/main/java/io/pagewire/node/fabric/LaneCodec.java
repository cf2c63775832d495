package io.pagewire.node.fabric;

import io.pagewire.node.nic.Packet;
import io.pagewire.node.nic.PacketBatch;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * A lane message's bytes, written and read without a protobuf object per packet. The bytes are exactly
 * fabric.proto's encoding of a {@code LaneFrame} whose body is a {@code PacketBatch} (so any protobuf
 * implementation reads and writes lanes, and the schema stays the documentation of the wire), but
 * encoded straight from the NIC's packet slots and decoded straight into them:
 *
 * <pre>
 *   LaneFrame   := tag(2, LEN) varint(len) PacketBatch
 *   PacketBatch := { tag(1, LEN) varint(len) Packet }*
 *   Packet      := its non-zero fields 1..26 in field order, except the payload (field 8), written last
 *                  so that the transport copies its bytes once, straight from the sender's array
 * </pre>
 *
 * <p>Reading follows protobuf's rules: fields in any order, a field seen twice keeps its last value
 * (two batches merge; of two hellos the last is taken whole, where protobuf would merge them), unknown
 * fields (and known numbers with an unexpected wire type) are skipped, an unknown enum number is kept;
 * what is not protobuf at all (a truncated varint or length, a length past the message, an
 * unterminated group) makes the whole message malformed.
 */
final class LaneCodec {
    static final int WIRE_VARINT = 0;
    static final int WIRE_FIXED64 = 1;
    static final int WIRE_LEN = 2;
    static final int WIRE_START_GROUP = 3;
    static final int WIRE_END_GROUP = 4;
    static final int WIRE_FIXED32 = 5;

    /** LaneFrame's fields. */
    static final int FRAME_HELLO = 1;
    static final int FRAME_BATCH = 2;
    /** PacketBatch's one field. */
    static final int BATCH_PACKETS = 1;

    private static final int F_DST_QPN = 1;
    private static final int F_SRC_QPN = 2;
    private static final int F_PSN = 3;
    private static final int F_OPCODE = 4;
    private static final int F_REMOTE_ADDRESS = 5;
    private static final int F_RKEY = 6;
    private static final int F_LENGTH = 7;
    private static final int F_PAYLOAD = 8;
    private static final int F_COUNTER_ID = 9;
    private static final int F_ADD = 10;
    private static final int F_SYNDROME = 11;
    private static final int F_ACK_PSN = 12;
    private static final int F_CREDIT_LIMIT = 13;
    private static final int F_RNR_DELAY_NS = 14;
    private static final int F_ATOMIC_RESULT = 15;
    private static final int F_ERROR = 16;
    private static final int F_IMMEDIATE = 17;
    private static final int F_SWAP = 18;
    private static final int F_RETRANSMITTED = 19;
    private static final int F_SOLICITED = 20;
    private static final int F_INVALIDATE_RKEY = 21;
    private static final int F_QKEY = 22;
    private static final int F_GLOBAL_ROUTE = 23;
    private static final int F_MULTICAST_LID = 24;
    private static final int F_RECEIVES_PARK = 25;
    private static final int F_CREDITS_SPENT = 26;

    /** The most bytes fields 1 to 16 (the error's bytes apart) and fields 17 to 26 take: tags and varints at their longest. */
    private static final int HEADERS_BEFORE_ERROR_BYTES = 15 * 11 + 2 + 10;
    private static final int HEADERS_AFTER_ERROR_BYTES = 10 * 12;
    /** The least a writer's scratch array holds. */
    static final int SCRATCH_BYTES = 512;

    /** Nested groups deeper than this are not a lane message (protobuf's own recursion limit). */
    private static final int GROUP_DEPTH_LIMIT = 100;

    private LaneCodec() {
    }

    // ---- sizes --------------------------------------------------------------------------------------

    static int varintSize(long value) {
        return value == 0 ? 1 : (63 - Long.numberOfLeadingZeros(value)) / 7 + 1;
    }

    /** An unsigned 32-bit field's varint (a Java int read as unsigned, as protobuf writes uint32). */
    private static int uint32Size(int value) {
        return varintSize(value & 0xFFFF_FFFFL);
    }

    /** A Java int that protobuf writes as int32 (enums): a negative one takes ten bytes. */
    private static int int32Size(int value) {
        return varintSize(value);
    }

    private static int tagSize(int field) {
        return varintSize((long) field << 3);
    }

    /** The packet's encoded size without the payload's bytes and the error's (their tags and lengths included). */
    static int headerSize(Packet p, int errorLength) {
        int n = 0;
        n += p.getDstQpn() != 0 ? 1 + uint32Size(p.getDstQpn()) : 0;
        n += p.getSrcQpn() != 0 ? 1 + uint32Size(p.getSrcQpn()) : 0;
        n += p.getPsn() != 0 ? 1 + varintSize(p.getPsn()) : 0;
        n += p.getOpcodeValue() != 0 ? 1 + int32Size(p.getOpcodeValue()) : 0;
        n += p.getRemoteAddress() != 0 ? 1 + varintSize(p.getRemoteAddress()) : 0;
        n += p.getRkey() != 0 ? 1 + varintSize(p.getRkey()) : 0;
        n += p.getLength() != 0 ? 1 + uint32Size(p.getLength()) : 0;
        n += p.getCounterId() != 0 ? 1 + uint32Size(p.getCounterId()) : 0;
        n += p.getAdd() != 0 ? 1 + varintSize(p.getAdd()) : 0;
        n += p.getSyndromeValue() != 0 ? 1 + int32Size(p.getSyndromeValue()) : 0;
        n += p.getAckPsn() != 0 ? 1 + varintSize(p.getAckPsn()) : 0;
        n += p.getCreditLimit() != 0 ? 1 + varintSize(p.getCreditLimit()) : 0;
        n += p.getRnrDelayNs() != 0 ? 1 + varintSize(p.getRnrDelayNs()) : 0;
        n += p.getAtomicResult() != 0 ? 1 + varintSize(p.getAtomicResult()) : 0;
        n += errorLength != 0 ? 2 + varintSize(errorLength) + errorLength : 0;
        n += p.getImmediate() != 0 ? 2 + 4 : 0;
        n += p.getSwap() != 0 ? 2 + varintSize(p.getSwap()) : 0;
        n += p.getRetransmitted() ? 2 + 1 : 0;
        n += p.getSolicited() ? 2 + 1 : 0;
        n += p.getInvalidateRkey() != 0 ? 2 + 4 : 0;
        n += p.getQkey() != 0 ? 2 + 4 : 0;
        n += p.getGlobalRoute() ? 2 + 1 : 0;
        n += p.getMulticastLid() != 0 ? 2 + uint32Size(p.getMulticastLid()) : 0;
        n += p.getReceivesPark() ? 2 + 1 : 0;
        n += p.getCreditsSpent() != 0 ? 2 + uint32Size(p.getCreditsSpent()) : 0;
        int payload = p.payloadLength();
        n += payload != 0 ? 1 + varintSize(payload) : 0;
        return n;
    }

    // ---- writing ------------------------------------------------------------------------------------

    /**
     * Writes one batch as a LaneFrame, the headers through a small array of the writer's own and each
     * payload straight from its packet's array, so the transport copies payload bytes once.
     */
    static final class BatchWriter {
        private final PacketBatch batch;
        private final int[] packetSizes;
        private final byte[][] errors;
        private final int batchSize;
        private final int frameSize;

        BatchWriter(PacketBatch batch) {
            this.batch = batch;
            int count = batch.size();
            this.packetSizes = new int[count];
            byte[][] errorBytes = null;
            long total = 0;
            for (int i = 0; i < count; i++) {
                Packet p = batch.get(i);
                int errorLength = 0;
                if (!p.getError().isEmpty()) {
                    if (errorBytes == null) {
                        errorBytes = new byte[count][];
                    }
                    errorBytes[i] = p.errorBytes();
                    errorLength = errorBytes[i].length;
                }
                int size = headerSize(p, errorLength) + p.payloadLength();
                packetSizes[i] = size;
                total += 1 + varintSize(size) + size;
            }
            if (total > Integer.MAX_VALUE - 16) {
                throw new IllegalArgumentException("a batch of " + total + " bytes does not fit one lane message");
            }
            this.errors = errorBytes;
            this.batchSize = (int) total;
            this.frameSize = 1 + varintSize(batchSize) + batchSize;
        }

        /** The LaneFrame's size in bytes. */
        int size() {
            return frameSize;
        }

        /** Writes the frame; {@code scratch} holds headers between payloads (at least {@link #SCRATCH_BYTES}). */
        void writeTo(OutputStream out, byte[] scratch) throws IOException {
            Scratch s = new Scratch(scratch, out);
            s.tag(FRAME_BATCH, WIRE_LEN);
            s.varint(batchSize);
            for (int i = 0; i < batch.size(); i++) {
                Packet p = batch.get(i);
                s.room(32);
                s.tag(BATCH_PACKETS, WIRE_LEN);
                s.varint(packetSizes[i]);
                writeHeaders(s, p, errors == null ? null : errors[i]);
                int payload = p.payloadLength();
                if (payload != 0) {
                    s.room(16);
                    s.tag(F_PAYLOAD, WIRE_LEN);
                    s.varint(payload);
                    s.flush();
                    out.write(p.payloadArray(), p.payloadOffset(), payload);
                }
            }
            s.flush();
        }

        /** The whole frame in one new array (a transport that reads rather than drains). */
        byte[] toByteArray() {
            byte[] bytes = new byte[frameSize];
            try {
                writeTo(new ArrayOutput(bytes), new byte[SCRATCH_BYTES]);
            } catch (IOException e) {
                throw new IllegalStateException("writing into an array of the frame's own size failed", e);
            }
            return bytes;
        }
    }

    private static void writeHeaders(Scratch s, Packet p, byte[] error) throws IOException {
        s.room(HEADERS_BEFORE_ERROR_BYTES);
        if (p.getDstQpn() != 0) {
            s.tag(F_DST_QPN, WIRE_VARINT);
            s.varint(p.getDstQpn() & 0xFFFF_FFFFL);
        }
        if (p.getSrcQpn() != 0) {
            s.tag(F_SRC_QPN, WIRE_VARINT);
            s.varint(p.getSrcQpn() & 0xFFFF_FFFFL);
        }
        if (p.getPsn() != 0) {
            s.tag(F_PSN, WIRE_VARINT);
            s.varint(p.getPsn());
        }
        if (p.getOpcodeValue() != 0) {
            s.tag(F_OPCODE, WIRE_VARINT);
            s.varint(p.getOpcodeValue());
        }
        if (p.getRemoteAddress() != 0) {
            s.tag(F_REMOTE_ADDRESS, WIRE_VARINT);
            s.varint(p.getRemoteAddress());
        }
        if (p.getRkey() != 0) {
            s.tag(F_RKEY, WIRE_VARINT);
            s.varint(p.getRkey());
        }
        if (p.getLength() != 0) {
            s.tag(F_LENGTH, WIRE_VARINT);
            s.varint(p.getLength() & 0xFFFF_FFFFL);
        }
        if (p.getCounterId() != 0) {
            s.tag(F_COUNTER_ID, WIRE_VARINT);
            s.varint(p.getCounterId() & 0xFFFF_FFFFL);
        }
        if (p.getAdd() != 0) {
            s.tag(F_ADD, WIRE_VARINT);
            s.varint(p.getAdd());
        }
        if (p.getSyndromeValue() != 0) {
            s.tag(F_SYNDROME, WIRE_VARINT);
            s.varint(p.getSyndromeValue());
        }
        if (p.getAckPsn() != 0) {
            s.tag(F_ACK_PSN, WIRE_VARINT);
            s.varint(p.getAckPsn());
        }
        if (p.getCreditLimit() != 0) {
            s.tag(F_CREDIT_LIMIT, WIRE_VARINT);
            s.varint(p.getCreditLimit());
        }
        if (p.getRnrDelayNs() != 0) {
            s.tag(F_RNR_DELAY_NS, WIRE_VARINT);
            s.varint(p.getRnrDelayNs());
        }
        if (p.getAtomicResult() != 0) {
            s.tag(F_ATOMIC_RESULT, WIRE_VARINT);
            s.varint(p.getAtomicResult());
        }
        if (error != null && error.length != 0) {
            s.tag(F_ERROR, WIRE_LEN);
            s.varint(error.length);
            s.bytes(error);
            s.room(HEADERS_AFTER_ERROR_BYTES);
        }
        if (p.getImmediate() != 0) {
            s.tag(F_IMMEDIATE, WIRE_FIXED32);
            s.fixed32(p.getImmediate());
        }
        if (p.getSwap() != 0) {
            s.tag(F_SWAP, WIRE_VARINT);
            s.varint(p.getSwap());
        }
        if (p.getRetransmitted()) {
            s.tag(F_RETRANSMITTED, WIRE_VARINT);
            s.varint(1);
        }
        if (p.getSolicited()) {
            s.tag(F_SOLICITED, WIRE_VARINT);
            s.varint(1);
        }
        if (p.getInvalidateRkey() != 0) {
            s.tag(F_INVALIDATE_RKEY, WIRE_FIXED32);
            s.fixed32(p.getInvalidateRkey());
        }
        if (p.getQkey() != 0) {
            s.tag(F_QKEY, WIRE_FIXED32);
            s.fixed32(p.getQkey());
        }
        if (p.getGlobalRoute()) {
            s.tag(F_GLOBAL_ROUTE, WIRE_VARINT);
            s.varint(1);
        }
        if (p.getMulticastLid() != 0) {
            s.tag(F_MULTICAST_LID, WIRE_VARINT);
            s.varint(p.getMulticastLid() & 0xFFFF_FFFFL);
        }
        if (p.getReceivesPark()) {
            s.tag(F_RECEIVES_PARK, WIRE_VARINT);
            s.varint(1);
        }
        if (p.getCreditsSpent() != 0) {
            s.tag(F_CREDITS_SPENT, WIRE_VARINT);
            s.varint(p.getCreditsSpent() & 0xFFFF_FFFFL);
        }
    }

    /** Header bytes gathered in a small array and written out before each payload. */
    private static final class Scratch {
        private final byte[] bytes;
        private final OutputStream out;
        private int at;

        Scratch(byte[] bytes, OutputStream out) {
            this.bytes = bytes;
            this.out = out;
        }

        /** Writes what is gathered when fewer than {@code needed} bytes are left. */
        void room(int needed) throws IOException {
            if (bytes.length - at < needed) {
                flush();
            }
        }

        void flush() throws IOException {
            if (at > 0) {
                out.write(bytes, 0, at);
                at = 0;
            }
        }

        void tag(int field, int wireType) {
            varint(((long) field << 3) | wireType);
        }

        void varint(long value) {
            while ((value & ~0x7FL) != 0) {
                bytes[at++] = (byte) ((value & 0x7F) | 0x80);
                value >>>= 7;
            }
            bytes[at++] = (byte) value;
        }

        void fixed32(int value) {
            bytes[at++] = (byte) value;
            bytes[at++] = (byte) (value >>> 8);
            bytes[at++] = (byte) (value >>> 16);
            bytes[at++] = (byte) (value >>> 24);
        }

        void bytes(byte[] value) throws IOException {
            if (value.length > bytes.length - at) {
                flush();
                out.write(value);
                return;
            }
            System.arraycopy(value, 0, bytes, at, value.length);
            at += value.length;
        }
    }

    /** An output stream into one array of the right size. */
    private static final class ArrayOutput extends OutputStream {
        private final byte[] into;
        private int at;

        ArrayOutput(byte[] into) {
            this.into = into;
        }

        @Override
        public void write(int b) {
            into[at++] = (byte) b;
        }

        @Override
        public void write(byte[] b, int off, int len) {
            System.arraycopy(b, off, into, at, len);
            at += len;
        }
    }

    // ---- reading ------------------------------------------------------------------------------------

    /** Bytes that are not a lane message; the message is dropped whole and the lane ends, saying why. */
    static final class MalformedException extends IOException {
        MalformedException(String message) {
            super(message);
        }
    }

    /** What {@link #readFrame} found when the frame carries no hello. */
    static final long NO_BODY = -1;
    static final long BATCH = -2;

    /**
     * Reads a LaneFrame from [offset, offset + length) of {@code bytes}. A batch's packets are added to
     * {@code into} (their payloads are views of {@code bytes}) and {@link #BATCH} is returned; a hello's
     * bytes are returned as {@code (offset << 32) | length}; a frame with neither body gives {@link #NO_BODY}.
     */
    static long readFrame(byte[] bytes, int offset, int length, PacketBatch into) throws MalformedException {
        Reader r = new Reader(bytes, offset, offset + length);
        long body = NO_BODY;
        while (r.more()) {
            int tag = r.tag();
            switch (tag) {
                case (FRAME_HELLO << 3) | WIRE_LEN -> {
                    int size = r.length();
                    body = ((long) r.at << 32) | size;
                    r.at += size;
                    into.clear(); // a oneof: the last body wins
                }
                case (FRAME_BATCH << 3) | WIRE_LEN -> {
                    int size = r.length();
                    if (body != BATCH) {
                        into.clear(); // a oneof: a batch after a hello replaces it; batches merge
                    }
                    body = BATCH;
                    int outer = r.limit(r.at + size);
                    readBatch(r, into);
                    r.end = outer;
                }
                default -> r.skip(tag, 0);
            }
        }
        return body;
    }

    /** Reads a PacketBatch's packets up to the reader's end; one reader for the whole message, so nothing is allocated per packet. */
    private static void readBatch(Reader r, PacketBatch into) throws MalformedException {
        while (r.more()) {
            int tag = r.tag();
            if (tag == ((BATCH_PACKETS << 3) | WIRE_LEN)) {
                int size = r.length();
                int outer = r.limit(r.at + size);
                readPacket(r, into.add());
                r.end = outer;
            } else {
                r.skip(tag, 0);
            }
        }
    }

    private static void readPacket(Reader r, Packet p) throws MalformedException {
        byte[] bytes = r.bytes;
        while (r.more()) {
            int tag = r.tag();
            switch (tag) {
                case (F_DST_QPN << 3) -> p.setDstQpn((int) r.varint());
                case (F_SRC_QPN << 3) -> p.setSrcQpn((int) r.varint());
                case (F_PSN << 3) -> p.setPsn(r.varint());
                case (F_OPCODE << 3) -> p.setOpcodeValue((int) r.varint());
                case (F_REMOTE_ADDRESS << 3) -> p.setRemoteAddress(r.varint());
                case (F_RKEY << 3) -> p.setRkey(r.varint());
                case (F_LENGTH << 3) -> p.setLength((int) r.varint());
                case (F_PAYLOAD << 3) | WIRE_LEN -> {
                    int size = r.length();
                    p.setPayload(bytes, r.at, size);
                    r.at += size;
                }
                case (F_COUNTER_ID << 3) -> p.setCounterId((int) r.varint());
                case (F_ADD << 3) -> p.setAdd(r.varint());
                case (F_SYNDROME << 3) -> p.setSyndromeValue((int) r.varint());
                case (F_ACK_PSN << 3) -> p.setAckPsn(r.varint());
                case (F_CREDIT_LIMIT << 3) -> p.setCreditLimit(r.varint());
                case (F_RNR_DELAY_NS << 3) -> p.setRnrDelayNs(r.varint());
                case (F_ATOMIC_RESULT << 3) -> p.setAtomicResult(r.varint());
                case (F_ERROR << 3) | WIRE_LEN -> {
                    int size = r.length();
                    p.setError(new String(bytes, r.at, size, StandardCharsets.UTF_8));
                    r.at += size;
                }
                case (F_IMMEDIATE << 3) | WIRE_FIXED32 -> p.setImmediate(r.fixed32());
                case (F_SWAP << 3) -> p.setSwap(r.varint());
                case (F_RETRANSMITTED << 3) -> p.setRetransmitted(r.varint() != 0);
                case (F_SOLICITED << 3) -> p.setSolicited(r.varint() != 0);
                case (F_INVALIDATE_RKEY << 3) | WIRE_FIXED32 -> p.setInvalidateRkey(r.fixed32());
                case (F_QKEY << 3) | WIRE_FIXED32 -> p.setQkey(r.fixed32());
                case (F_GLOBAL_ROUTE << 3) -> p.setGlobalRoute(r.varint() != 0);
                case (F_MULTICAST_LID << 3) -> p.setMulticastLid((int) r.varint());
                case (F_RECEIVES_PARK << 3) -> p.setReceivesPark(r.varint() != 0);
                case (F_CREDITS_SPENT << 3) -> p.setCreditsSpent((int) r.varint());
                default -> r.skip(tag, 0);
            }
        }
    }

    /** A cursor over [at, end) of an array, reading protobuf's primitives and refusing what is not protobuf. */
    private static final class Reader {
        final byte[] bytes;
        /** Where the message being read ends (a nested one's end while it is read). */
        int end;
        int at;

        Reader(byte[] bytes, int from, int end) {
            this.bytes = bytes;
            this.at = from;
            this.end = end;
        }

        boolean more() {
            return at < end;
        }

        /** Reads up to {@code nestedEnd} (within the current end) from now on; returns the end to restore after. */
        int limit(int nestedEnd) {
            int outer = end;
            end = nestedEnd;
            return outer;
        }

        int tag() throws MalformedException {
            long tag = varint();
            if (tag >>> 3 == 0 || tag > 0xFFFF_FFFFL) {
                throw new MalformedException("field number 0 or out of range at byte " + at);
            }
            return (int) tag;
        }

        long varint() throws MalformedException {
            long value = 0;
            for (int shift = 0; shift < 64; shift += 7) {
                if (at >= end) {
                    throw new MalformedException("a varint runs past the end of its message");
                }
                byte b = bytes[at++];
                value |= (long) (b & 0x7F) << shift;
                if (b >= 0) {
                    return value;
                }
            }
            throw new MalformedException("a varint longer than ten bytes");
        }

        int fixed32() throws MalformedException {
            if (end - at < 4) {
                throw new MalformedException("a fixed32 runs past the end of its message");
            }
            int v = (bytes[at] & 0xFF) | (bytes[at + 1] & 0xFF) << 8 | (bytes[at + 2] & 0xFF) << 16 | (bytes[at + 3] & 0xFF) << 24;
            at += 4;
            return v;
        }

        /** A length-delimited field's length, checked against what is left. */
        int length() throws MalformedException {
            long size = varint();
            if (size < 0 || size > end - at) {
                throw new MalformedException("a length of " + size + " runs past the end of its message (" + (end - at) + " bytes left)");
            }
            return (int) size;
        }

        /** Skips a field this reader does not take, as protobuf keeps it unknown. */
        void skip(int tag, int depth) throws MalformedException {
            switch (tag & 7) {
                case WIRE_VARINT -> varint();
                case WIRE_FIXED64 -> advance(8);
                case WIRE_LEN -> advance(length());
                case WIRE_FIXED32 -> advance(4);
                case WIRE_START_GROUP -> {
                    if (depth >= GROUP_DEPTH_LIMIT) {
                        throw new MalformedException("groups nested deeper than " + GROUP_DEPTH_LIMIT);
                    }
                    int endTag = (tag & ~7) | WIRE_END_GROUP;
                    while (true) {
                        if (!more()) {
                            throw new MalformedException("a group without its end");
                        }
                        int inner = tag();
                        if (inner == endTag) {
                            return;
                        }
                        skip(inner, depth + 1);
                    }
                }
                default -> throw new MalformedException("wire type " + (tag & 7) + " where no group is open");
            }
        }

        private void advance(int n) throws MalformedException {
            if (end - at < n) {
                throw new MalformedException("a field runs past the end of its message");
            }
            at += n;
        }
    }
}
