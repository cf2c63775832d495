package io.pagewire.node.nic;

import com.google.protobuf.ByteString;
import com.google.protobuf.UnsafeByteOperations;
import io.pagewire.proto.fabric.Opcode;
import io.pagewire.proto.fabric.Syndrome;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * One packet of the reliable-connected transport as the NIC sees it: the headers of fabric.proto's
 * {@code Packet} (whose comments say what each field means) as plain fields, and a payload that is a
 * view of an array the packet does not own. A packet is a reusable slot, not a value: an
 * {@link Outbox} fills its slots batch after batch, a transport decodes a lane message into one
 * {@link PacketBatch} per receiving thread, so the data path builds no object per packet. Whoever keeps
 * a packet beyond the call that handed it over keeps a {@link #copy()}: the slot and the array its
 * payload views are both reused.
 */
public final class Packet {
    private static final byte[] NO_BYTES = new byte[0];

    private int dstQpn;
    private int srcQpn;
    private long psn;
    private int opcode;
    private long remoteAddress;
    private long rkey;
    private int length;
    private byte[] payloadArray = NO_BYTES;
    private int payloadOffset;
    private int payloadLength;
    private int counterId;
    private long add;
    private int syndrome;
    private long ackPsn;
    private long creditLimit;
    private long rnrDelayNs;
    private long atomicResult;
    private String error = "";
    private int immediate;
    private long swap;
    private boolean retransmitted;
    private boolean solicited;
    private int invalidateRkey;
    private int qkey;
    private boolean globalRoute;
    private int multicastLid;
    private boolean receivesPark;
    private int creditsSpent;
    /** {@link #payloadBuffer()}'s view, and the array it wraps. */
    private ByteBuffer payloadView;
    private byte[] payloadViewOf;

    /** Every field back to its default (zero, empty), as a new packet. */
    public Packet clear() {
        dstQpn = 0;
        srcQpn = 0;
        psn = 0;
        opcode = 0;
        remoteAddress = 0;
        rkey = 0;
        length = 0;
        payloadArray = NO_BYTES;
        payloadOffset = 0;
        payloadLength = 0;
        counterId = 0;
        add = 0;
        syndrome = 0;
        ackPsn = 0;
        creditLimit = 0;
        rnrDelayNs = 0;
        atomicResult = 0;
        error = "";
        immediate = 0;
        swap = 0;
        retransmitted = false;
        solicited = false;
        invalidateRkey = 0;
        qkey = 0;
        globalRoute = false;
        multicastLid = 0;
        receivesPark = false;
        creditsSpent = 0;
        return this;
    }

    /** This packet's fields into {@code into}; the payload stays a view of the same array. */
    void copyHeadersTo(Packet into) {
        into.dstQpn = dstQpn;
        into.srcQpn = srcQpn;
        into.psn = psn;
        into.opcode = opcode;
        into.remoteAddress = remoteAddress;
        into.rkey = rkey;
        into.length = length;
        into.payloadArray = payloadArray;
        into.payloadOffset = payloadOffset;
        into.payloadLength = payloadLength;
        into.counterId = counterId;
        into.add = add;
        into.syndrome = syndrome;
        into.ackPsn = ackPsn;
        into.creditLimit = creditLimit;
        into.rnrDelayNs = rnrDelayNs;
        into.atomicResult = atomicResult;
        into.error = error;
        into.immediate = immediate;
        into.swap = swap;
        into.retransmitted = retransmitted;
        into.solicited = solicited;
        into.invalidateRkey = invalidateRkey;
        into.qkey = qkey;
        into.globalRoute = globalRoute;
        into.multicastLid = multicastLid;
        into.receivesPark = receivesPark;
        into.creditsSpent = creditsSpent;
    }

    /** A packet of its own with the same fields and a copy of the payload's bytes: one to keep. */
    public Packet copy() {
        Packet copy = new Packet();
        copyHeadersTo(copy);
        copy.payloadArray = payloadLength == 0 ? NO_BYTES : Arrays.copyOfRange(payloadArray, payloadOffset, payloadOffset + payloadLength);
        copy.payloadOffset = 0;
        return copy;
    }

    /** As {@link #copy()}, without the payload (what a deferred READ or atomic keeps). */
    Packet copyWithoutPayload() {
        Packet copy = new Packet();
        copyHeadersTo(copy);
        copy.payloadArray = NO_BYTES;
        copy.payloadOffset = 0;
        copy.payloadLength = 0;
        return copy;
    }

    // ---- headers ------------------------------------------------------------------------------------

    public int getDstQpn() {
        return dstQpn;
    }

    public Packet setDstQpn(int value) {
        dstQpn = value;
        return this;
    }

    public int getSrcQpn() {
        return srcQpn;
    }

    public Packet setSrcQpn(int value) {
        srcQpn = value;
        return this;
    }

    public long getPsn() {
        return psn;
    }

    public Packet setPsn(long value) {
        psn = value;
        return this;
    }

    /** The opcode, or {@link Opcode#UNRECOGNIZED} for a number this build does not know. */
    public Opcode getOpcode() {
        Opcode known = Opcode.forNumber(opcode);
        return known == null ? Opcode.UNRECOGNIZED : known;
    }

    public int getOpcodeValue() {
        return opcode;
    }

    public Packet setOpcode(Opcode value) {
        opcode = value.getNumber();
        return this;
    }

    public Packet setOpcodeValue(int value) {
        opcode = value;
        return this;
    }

    public long getRemoteAddress() {
        return remoteAddress;
    }

    public Packet setRemoteAddress(long value) {
        remoteAddress = value;
        return this;
    }

    public long getRkey() {
        return rkey;
    }

    public Packet setRkey(long value) {
        rkey = value;
        return this;
    }

    public int getLength() {
        return length;
    }

    public Packet setLength(int value) {
        length = value;
        return this;
    }

    public int getCounterId() {
        return counterId;
    }

    public Packet setCounterId(int value) {
        counterId = value;
        return this;
    }

    public long getAdd() {
        return add;
    }

    public Packet setAdd(long value) {
        add = value;
        return this;
    }

    /** The syndrome, or {@link Syndrome#UNRECOGNIZED} for a number this build does not know. */
    public Syndrome getSyndrome() {
        Syndrome known = Syndrome.forNumber(syndrome);
        return known == null ? Syndrome.UNRECOGNIZED : known;
    }

    public int getSyndromeValue() {
        return syndrome;
    }

    public Packet setSyndrome(Syndrome value) {
        syndrome = value.getNumber();
        return this;
    }

    public Packet setSyndromeValue(int value) {
        syndrome = value;
        return this;
    }

    public long getAckPsn() {
        return ackPsn;
    }

    public Packet setAckPsn(long value) {
        ackPsn = value;
        return this;
    }

    public long getCreditLimit() {
        return creditLimit;
    }

    public Packet setCreditLimit(long value) {
        creditLimit = value;
        return this;
    }

    public long getRnrDelayNs() {
        return rnrDelayNs;
    }

    public Packet setRnrDelayNs(long value) {
        rnrDelayNs = value;
        return this;
    }

    public long getAtomicResult() {
        return atomicResult;
    }

    public Packet setAtomicResult(long value) {
        atomicResult = value;
        return this;
    }

    public String getError() {
        return error;
    }

    public Packet setError(String value) {
        error = value == null ? "" : value;
        return this;
    }

    /** The error's UTF-8 bytes, for the transport (errors end requests, so they are rare). */
    public byte[] errorBytes() {
        return error.isEmpty() ? NO_BYTES : error.getBytes(StandardCharsets.UTF_8);
    }

    public int getImmediate() {
        return immediate;
    }

    public Packet setImmediate(int value) {
        immediate = value;
        return this;
    }

    public long getSwap() {
        return swap;
    }

    public Packet setSwap(long value) {
        swap = value;
        return this;
    }

    public boolean getRetransmitted() {
        return retransmitted;
    }

    public Packet setRetransmitted(boolean value) {
        retransmitted = value;
        return this;
    }

    public boolean getSolicited() {
        return solicited;
    }

    public Packet setSolicited(boolean value) {
        solicited = value;
        return this;
    }

    public int getInvalidateRkey() {
        return invalidateRkey;
    }

    public Packet setInvalidateRkey(int value) {
        invalidateRkey = value;
        return this;
    }

    public int getQkey() {
        return qkey;
    }

    public Packet setQkey(int value) {
        qkey = value;
        return this;
    }

    public boolean getGlobalRoute() {
        return globalRoute;
    }

    public Packet setGlobalRoute(boolean value) {
        globalRoute = value;
        return this;
    }

    public int getMulticastLid() {
        return multicastLid;
    }

    public Packet setMulticastLid(int value) {
        multicastLid = value;
        return this;
    }

    public boolean getReceivesPark() {
        return receivesPark;
    }

    public Packet setReceivesPark(boolean value) {
        receivesPark = value;
        return this;
    }

    public int getCreditsSpent() {
        return creditsSpent;
    }

    public Packet setCreditsSpent(int value) {
        creditsSpent = value;
        return this;
    }

    // ---- payload ------------------------------------------------------------------------------------

    /** The payload is bytes [offset, offset + length) of {@code array}, which stays the caller's: no copy is made. */
    public Packet setPayload(byte[] array, int offset, int length) {
        if (offset < 0 || length < 0 || offset + length > array.length) {
            throw new IndexOutOfBoundsException("payload [" + offset + ", " + offset + "+" + length + ") of an array of " + array.length);
        }
        payloadArray = array;
        payloadOffset = offset;
        payloadLength = length;
        return this;
    }

    /** A payload of its own: a copy of {@code bytes}. */
    public Packet setPayload(byte[] bytes) {
        return setPayload(bytes.clone(), 0, bytes.length);
    }

    public int payloadLength() {
        return payloadLength;
    }

    public boolean hasPayload() {
        return payloadLength > 0;
    }

    /** The array the payload is a view of (shared: read [{@link #payloadOffset}, + {@link #payloadLength}) only). */
    public byte[] payloadArray() {
        return payloadArray;
    }

    public int payloadOffset() {
        return payloadOffset;
    }

    /**
     * The payload as a read-only buffer over the same bytes, between its position and limit (no copy).
     * The buffer is the packet's own and reused: made again only when the payload's array changes, so a
     * slot reused over one receive array allocates none; it is valid until the next call.
     */
    public ByteBuffer payloadBuffer() {
        if (payloadViewOf != payloadArray) {
            payloadView = ByteBuffer.wrap(payloadArray).asReadOnlyBuffer();
            payloadViewOf = payloadArray;
        }
        payloadView.limit(payloadOffset + payloadLength);
        payloadView.position(payloadOffset);
        return payloadView;
    }

    /** The payload as a ByteString over the same bytes (no copy: valid only while the array is). */
    public ByteString payload() {
        return payloadLength == 0 ? ByteString.EMPTY : UnsafeByteOperations.unsafeWrap(payloadArray, payloadOffset, payloadLength);
    }

    /** A copy of the payload's bytes. */
    public byte[] payloadBytes() {
        return Arrays.copyOfRange(payloadArray, payloadOffset, payloadOffset + payloadLength);
    }

    @Override
    public String toString() {
        StringBuilder s = new StringBuilder(96).append(getOpcode()).append(" psn ").append(psn).append(" qpn ").append(srcQpn).append("->")
                .append(dstQpn);
        if (syndrome != 0) {
            s.append(' ').append(getSyndrome()).append(" ack ").append(ackPsn);
        }
        if (rkey != 0) {
            s.append(String.format(" rkey 0x%x at 0x%x", rkey, remoteAddress));
        }
        if (payloadLength > 0) {
            s.append(' ').append(payloadLength).append(" bytes");
        }
        if (!error.isEmpty()) {
            s.append(" error \"").append(error).append('"');
        }
        return s.toString();
    }
}
