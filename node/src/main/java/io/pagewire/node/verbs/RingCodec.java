package io.pagewire.node.verbs;

import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.ReceiveRequest;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.ring.CompletionRecord;
import io.pagewire.ring.CounterRecord;
import io.pagewire.ring.CpuUnmapRecord;
import io.pagewire.ring.FaultServedRecord;
import io.pagewire.ring.PostReceiveRecord;
import io.pagewire.ring.PostRecord;
import io.pagewire.ring.RefusedRecord;
import java.util.ArrayList;
import java.util.List;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.ringbuffer.RingBuffer;

/**
 * The node's half of the ring records the ring module lays out: it reads posted work requests and
 * receives into the NIC's types, and writes completions, refusals and counter changes.
 */
final class RingCodec {
    /** How long a writer waits for room on a full event ring before the event goes on the stream instead. */
    private static final long FULL_RING_WAIT_NS = 2_000_000;

    private RingCodec() {
    }

    /** The work requests of a POST record, or null when the record is malformed. */
    static List<WorkRequest> decodePost(DirectBuffer b, int record, int length) {
        if (!PostRecord.isWellFormed(b, record, length)) {
            return null;
        }
        int count = PostRecord.count(b, record);
        List<WorkRequest> requests = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int wr = PostRecord.workRequest(record, i);
            requests.add(new WorkRequest(PostRecord.wrId(b, wr), WireCodes.opcode(PostRecord.opcode(b, wr)), PostRecord.lkey(b, wr),
                    PostRecord.localAddress(b, wr), PostRecord.length(b, wr), PostRecord.remoteAddress(b, wr), PostRecord.rkey(b, wr),
                    PostRecord.counterId(b, wr), PostRecord.add(b, wr), PostRecord.signaled(b, wr), PostRecord.immediate(b, wr),
                    PostRecord.swap(b, wr)));
        }
        return requests;
    }

    /** The receives of a POST_RECEIVE record, or null when the record is malformed. */
    static List<ReceiveRequest> decodeReceives(DirectBuffer b, int record, int length) {
        if (!PostReceiveRecord.isWellFormed(b, record, length)) {
            return null;
        }
        int count = PostReceiveRecord.count(b, record);
        List<ReceiveRequest> receives = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int receive = PostReceiveRecord.receive(record, i);
            receives.add(new ReceiveRequest(PostReceiveRecord.wrId(b, receive), PostReceiveRecord.lkey(b, receive),
                    PostReceiveRecord.address(b, receive), PostReceiveRecord.length(b, receive)));
        }
        return receives;
    }

    static boolean writeCompletion(RingBuffer ring, Completion c) {
        byte[] error = CompletionRecord.utf8(c.error());
        int index = claim(ring, CompletionRecord.TYPE, CompletionRecord.length(error.length));
        if (index < 0) {
            return false;
        }
        CompletionRecord.put(ring.buffer(), index, c.wrId(), c.qpn(), WireCodes.wireOpcode(c.opcode()), WireCodes.wireStatus(c.status()),
                c.bytes(), c.value(), c.hasImmediate(), c.immediate(), error);
        ring.commit(index);
        return true;
    }

    static boolean writeRefused(RingBuffer ring, int qpn, long wrId, int code, String message) {
        byte[] error = CompletionRecord.utf8(message);
        int index = claim(ring, RefusedRecord.TYPE, RefusedRecord.length(error.length));
        if (index < 0) {
            return false;
        }
        RefusedRecord.put(ring.buffer(), index, wrId, qpn, code, error);
        ring.commit(index);
        return true;
    }

    static boolean writeFaultServed(RingBuffer ring, long token, int status, String message) {
        byte[] error = message == null ? new byte[0] : CompletionRecord.utf8(message);
        int index = claim(ring, FaultServedRecord.TYPE, FaultServedRecord.length(error.length));
        if (index < 0) {
            return false;
        }
        FaultServedRecord.put(ring.buffer(), index, token, status, error);
        ring.commit(index);
        return true;
    }

    /** Without waiting for room (the kernel asks with its lock held): false when the ring is full. */
    static boolean tryWriteCpuUnmap(RingBuffer ring, long address, long length) {
        int index = ring.tryClaim(CpuUnmapRecord.TYPE, CpuUnmapRecord.LENGTH);
        if (index <= 0) {
            return false;
        }
        CpuUnmapRecord.put(ring.buffer(), index, address, length);
        ring.commit(index);
        return true;
    }

    static boolean writeCounter(RingBuffer ring, int counterId, long value) {
        int index = claim(ring, CounterRecord.TYPE, CounterRecord.LENGTH);
        if (index < 0) {
            return false;
        }
        CounterRecord.put(ring.buffer(), index, counterId, value);
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
}
