package io.pagewire.node.verbs;

import io.pagewire.client.impl.SessionRings;
import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.WorkRequest;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.ringbuffer.RingBuffer;

/**
 * The node's half of the ring records laid out in {@link SessionRings}: it decodes posted work
 * requests and encodes completions, refusals and counter changes.
 */
final class RingCodec {
    /** How long a writer waits for room on a full event ring before the event goes on the stream instead. */
    private static final long FULL_RING_WAIT_NS = 2_000_000;

    private RingCodec() {
    }

    /** The work requests of a POST record, or null when the record is malformed. */
    static List<WorkRequest> decodePost(DirectBuffer buffer, int offset, int length) {
        if (length < SessionRings.POST_HEADER_BYTES) {
            return null;
        }
        int count = buffer.getInt(offset + 4);
        if (count < 0 || length != SessionRings.POST_HEADER_BYTES + count * SessionRings.WORK_REQUEST_BYTES) {
            return null;
        }
        List<WorkRequest> requests = new ArrayList<>(count);
        int at = offset + SessionRings.POST_HEADER_BYTES;
        for (int i = 0; i < count; i++, at += SessionRings.WORK_REQUEST_BYTES) {
            int opcodeAndFlags = buffer.getInt(at + 8);
            Completion.Opcode opcode = Session.nicOpcode(io.pagewire.proto.verbs.WorkRequest.Opcode.forNumber(opcodeAndFlags & 0xFFFF));
            boolean signaled = (opcodeAndFlags & SessionRings.UNSIGNALED_FLAG) == 0;
            requests.add(new WorkRequest(buffer.getLong(at), opcode, buffer.getInt(at + 12), buffer.getLong(at + 16),
                    buffer.getInt(at + 24), buffer.getLong(at + 32), buffer.getLong(at + 40), buffer.getInt(at + 28), buffer.getLong(at + 48),
                    signaled, buffer.getInt(at + 56), buffer.getLong(at + 64)));
        }
        return requests;
    }

    /** The receives of a POST_RECEIVE record, or null when the record is malformed. */
    static List<io.pagewire.node.nic.ReceiveRequest> decodeReceives(DirectBuffer buffer, int offset, int length) {
        if (length < SessionRings.POST_RECEIVE_HEADER_BYTES) {
            return null;
        }
        int count = buffer.getInt(offset + 8);
        if (count < 0 || length != SessionRings.POST_RECEIVE_HEADER_BYTES + count * SessionRings.RECEIVE_REQUEST_BYTES) {
            return null;
        }
        List<io.pagewire.node.nic.ReceiveRequest> receives = new ArrayList<>(count);
        int at = offset + SessionRings.POST_RECEIVE_HEADER_BYTES;
        for (int i = 0; i < count; i++, at += SessionRings.RECEIVE_REQUEST_BYTES) {
            receives.add(new io.pagewire.node.nic.ReceiveRequest(buffer.getLong(at), buffer.getInt(at + 8), buffer.getLong(at + 16),
                    buffer.getInt(at + 12)));
        }
        return receives;
    }

    static int srqOfPostReceive(DirectBuffer buffer, int offset) {
        return buffer.getInt(offset + 4);
    }

    static int qpnOfPost(DirectBuffer buffer, int offset) {
        return buffer.getInt(offset);
    }

    static boolean writeCompletion(RingBuffer ring, Completion c) {
        byte[] error = c.error() == null ? EMPTY : c.error().getBytes(StandardCharsets.UTF_8);
        int length = SessionRings.COMPLETION_FIXED_BYTES + error.length;
        int index = claim(ring, SessionRings.COMPLETION, length);
        if (index < 0) {
            return false;
        }
        var b = ring.buffer();
        b.putLong(index, c.wrId());
        b.putInt(index + 8, c.qpn());
        b.putInt(index + 12, Session.opcode(c.opcode()).getNumber());
        b.putInt(index + 16, Session.status(c.status()).getNumber());
        b.putInt(index + 20, error.length);
        b.putLong(index + 24, c.bytes());
        b.putLong(index + 32, c.value());
        b.putInt(index + 40, c.hasImmediate() ? SessionRings.HAS_IMMEDIATE_FLAG : 0);
        b.putInt(index + 44, c.immediate());
        b.putBytes(index + SessionRings.COMPLETION_FIXED_BYTES, error);
        ring.commit(index);
        return true;
    }

    static boolean writeRefused(RingBuffer ring, int qpn, long wrId, String message) {
        byte[] error = message == null ? EMPTY : message.getBytes(StandardCharsets.UTF_8);
        int index = claim(ring, SessionRings.REFUSED, SessionRings.REFUSED_FIXED_BYTES + error.length);
        if (index < 0) {
            return false;
        }
        var b = ring.buffer();
        b.putLong(index, wrId);
        b.putInt(index + 8, qpn);
        b.putInt(index + 12, error.length);
        b.putBytes(index + 16, error);
        ring.commit(index);
        return true;
    }

    static boolean writeCounter(RingBuffer ring, int counterId, long value) {
        int index = claim(ring, SessionRings.COUNTER, SessionRings.COUNTER_BYTES);
        if (index < 0) {
            return false;
        }
        var b = ring.buffer();
        b.putInt(index, counterId);
        b.putLong(index + 8, value);
        ring.commit(index);
        return true;
    }

    /** Claims room for a record, waiting briefly while the application drains a full ring; negative if it stays full. */
    private static int claim(RingBuffer ring, int type, int length) {
        if (length > ring.maxMsgLength()) {
            return -1;
        }
        int index = ring.tryClaim(type, length);
        if (index > 0) {
            return index;
        }
        long deadline = System.nanoTime() + FULL_RING_WAIT_NS;
        while (System.nanoTime() - deadline < 0) {
            Thread.onSpinWait();
            index = ring.tryClaim(type, length);
            if (index > 0) {
                return index;
            }
        }
        return -1;
    }

    private static final byte[] EMPTY = new byte[0];
}
