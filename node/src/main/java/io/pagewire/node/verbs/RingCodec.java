package io.pagewire.node.verbs;

import io.pagewire.node.nic.Completion;
import io.pagewire.node.nic.Datagram;
import io.pagewire.node.nic.ReceiveRequest;
import io.pagewire.node.nic.Segment;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.node.trace.HopTrace;
import io.pagewire.ring.CompletionRecord;
import io.pagewire.ring.CounterRecord;
import io.pagewire.ring.CpuUnmapRecord;
import io.pagewire.ring.FaultServedRecord;
import io.pagewire.ring.PostReceiveRecord;
import io.pagewire.ring.PostRecord;
import io.pagewire.ring.RefusedRecord;
import io.pagewire.ring.ScatterGatherRecord;
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
            int lkey = PostRecord.lkey(b, wr);
            int bytes = PostRecord.length(b, wr);
            List<Segment> local = lkey == 0 && bytes == 0 ? List.of() : List.of(new Segment(lkey, PostRecord.localAddress(b, wr), bytes));
            requests.add(workRequest(b, wr, local, bytes));
        }
        return requests;
    }

    /** The work request of a POST_LIST record, with its scatter/gather list; null when the record is malformed. */
    static WorkRequest decodePostList(DirectBuffer b, int record, int length) {
        if (!ScatterGatherRecord.isWellFormed(b, ScatterGatherRecord.POST_TYPE, record, length)) {
            return null;
        }
        List<Segment> elements = elements(b, ScatterGatherRecord.POST_TYPE, record);
        long sum = elements.stream().mapToLong(Segment::length).sum();
        if (sum != (int) sum) {
            // Elements adding up past a message: carried as one of negative length, which the post refuses with the rest of its checks.
            return workRequest(b, ScatterGatherRecord.body(record), List.of(new Segment(0, 0, -1)), -1);
        }
        return workRequest(b, ScatterGatherRecord.body(record), elements, (int) sum);
    }

    private static WorkRequest workRequest(DirectBuffer b, int wr, List<Segment> local, int length) {
        long remote = PostRecord.remoteAddress(b, wr);
        long rkey = PostRecord.rkey(b, wr);
        Datagram datagram = PostRecord.datagram(b, wr)
                ? new Datagram(null, (int) (remote & 0xFFFF), (int) rkey, (int) (rkey >>> 32), (remote & 0x1_0000) != 0) : null;
        return new WorkRequest(PostRecord.wrId(b, wr), WireCodes.opcode(PostRecord.opcode(b, wr)), local, length,
                datagram == null ? remote : 0, datagram == null ? rkey : 0, PostRecord.counterId(b, wr), PostRecord.add(b, wr),
                PostRecord.signaled(b, wr), PostRecord.immediate(b, wr), PostRecord.swap(b, wr), PostRecord.fence(b, wr),
                PostRecord.solicited(b, wr), datagram);
    }

    /** The elements of a scatter/gather record. */
    private static List<Segment> elements(DirectBuffer b, int type, int record) {
        int count = ScatterGatherRecord.count(b, record);
        List<Segment> elements = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int e = ScatterGatherRecord.element(type, record, i);
            elements.add(new Segment(ScatterGatherRecord.lkey(b, e), ScatterGatherRecord.address(b, e), ScatterGatherRecord.length(b, e)));
        }
        return elements;
    }

    /** The receive of a POST_RECEIVE_LIST record, with its scatter list; null when the record is malformed. */
    static ReceiveRequest decodeReceiveList(DirectBuffer b, int record, int length) {
        if (!ScatterGatherRecord.isWellFormed(b, ScatterGatherRecord.RECEIVE_TYPE, record, length)) {
            return null;
        }
        List<Segment> elements = elements(b, ScatterGatherRecord.RECEIVE_TYPE, record);
        long sum = elements.stream().mapToLong(Segment::length).sum();
        long wrId = PostReceiveRecord.wrId(b, ScatterGatherRecord.body(record));
        return sum == (int) sum ? new ReceiveRequest(wrId, elements, (int) sum) : new ReceiveRequest(wrId, 0, 0, -1);
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
            int bytes = PostReceiveRecord.length(b, receive);
            receives.add(bytes == 0 && PostReceiveRecord.lkey(b, receive) == 0 ? new ReceiveRequest(PostReceiveRecord.wrId(b, receive), List.of(), 0)
                    : new ReceiveRequest(PostReceiveRecord.wrId(b, receive), PostReceiveRecord.lkey(b, receive),
                            PostReceiveRecord.address(b, receive), bytes));
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
                c.bytes(), c.source() == null ? c.value() : Integer.toUnsignedLong(c.source().qpn()) | (long) c.source().lid() << 32,
                (c.hasImmediate() ? CompletionRecord.HAS_IMMEDIATE_FLAG : 0) | (c.solicited() ? CompletionRecord.SOLICITED_FLAG : 0)
                        | (c.invalidated() ? CompletionRecord.INVALIDATED_FLAG : 0) | (c.source() == null ? 0 : CompletionRecord.DATAGRAM_FLAG)
                        | (c.source() != null && c.source().globalRoute() ? CompletionRecord.GLOBAL_ROUTE_FLAG : 0),
                c.immediate(), System.nanoTime(), error); // the host's CLOCK_MONOTONIC, the clock the library reads
        ring.commit(index);
        HopTrace.mark(HopTrace.Hop.COMPLETION_WRITTEN);
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
