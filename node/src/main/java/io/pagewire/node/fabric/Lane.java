package io.pagewire.node.fabric;

import io.grpc.stub.CallStreamObserver;
import io.pagewire.node.loop.LoopDutyCycle;
import io.pagewire.node.trace.HopTrace;
import io.pagewire.node.nic.PacketBatch;
import io.pagewire.proto.fabric.LaneHello;
import java.util.Locale;
import java.util.function.Predicate;

/**
 * One bidirectional stream to a peer, from either end: the node that dialled it (OUTBOUND) or the one
 * that accepted it (INBOUND). Sends are serialised (a stream observer is not thread-safe) and respect
 * gRPC's flow control through {@link #isReady}.
 */
final class Lane {
    /** Which end of the stream this node is. */
    enum Direction {
        OUTBOUND,
        INBOUND
    }

    final String peer;
    final int index;
    final Direction direction;
    private final CallStreamObserver<LaneMessage> out;
    private volatile boolean up;
    private boolean closed;

    Lane(String peer, int index, Direction direction, CallStreamObserver<LaneMessage> out) {
        this.peer = peer;
        this.index = index;
        this.direction = direction;
        this.out = out;
    }

    boolean isUp() {
        return up;
    }

    void markUp() {
        up = true;
    }

    void markDown() {
        up = false;
    }

    boolean isReady() {
        return up && out.isReady();
    }

    /** Writes a message; false if the lane is closed or the stream refused it. */
    synchronized boolean send(LaneMessage frame) {
        if (closed) {
            return false;
        }
        try {
            if (HopTrace.isArmed()) {
                HopTrace.mark(carriesRequest(frame) ? HopTrace.Hop.LANE_SEND_REQUEST : HopTrace.Hop.LANE_SEND_RESPONSE);
            }
            out.onNext(frame);
            return true;
        } catch (RuntimeException e) {
            // The call was cancelled underneath us; the stream's own callbacks report the loss.
            up = false;
            return false;
        }
    }

    /** Ends the stream from this side. */
    synchronized void close(Throwable error) {
        if (closed) {
            return;
        }
        closed = true;
        up = false;
        try {
            if (error == null) {
                out.onCompleted();
            } else {
                out.onError(error);
            }
        } catch (RuntimeException ignored) {
            // Already gone.
        }
    }

    @Override
    public String toString() {
        return direction.name().toLowerCase(Locale.ROOT) + " lane " + index + " to " + peer;
    }

    /** The first frame on a lane, either way: who this node is, which lane, and which process of it. */
    static LaneMessage hello(String nodeId, int index, long incarnation) {
        return LaneMessage.hello(LaneHello.newBuilder().setNodeId(nodeId).setLaneIndex(index).setIncarnation(incarnation).build());
    }

    /**
     * Hands a lane's frame to its handler, asks for the next unless the handler ended the lane, and
     * gives the frame's receive buffer back (its payloads are not read after this).
     *
     * <p>A frame whose batch stalled the lane (a PIN_ON_MISS receive waited for the kernel) is not
     * followed at once: the next is asked for two loop passes later, once the acknowledgements of
     * what the stalled batch executed (sent at the next pass's start) were flushed by that pass's tasks.
     * Read on at once, the loop would execute batch after stalled batch while every acknowledgement
     * waited behind them, and the requesters' timers would expire on data that had long arrived: a
     * NIC's receive stalls, its transmit side does not.
     */
    static void handle(LaneMessage frame, Predicate<LaneMessage> handler, Runnable requestNext) {
        if (HopTrace.isArmed()) {
            HopTrace.mark(carriesRequest(frame) ? HopTrace.Hop.LANE_RECEIVE_REQUEST : HopTrace.Hop.LANE_RECEIVE_RESPONSE);
        }
        try {
            if (handler.test(frame)) {
                LoopDutyCycle cycle = LaneSink.takeStall() ? LoopDutyCycle.onThisLoop() : null;
                if (cycle == null) {
                    requestNext.run();
                } else {
                    cycle.again(() -> cycle.again(requestNext::run));
                }
            }
        } finally {
            LaneMarshaller.release(frame);
        }
    }

    /** Whether any packet of the frame asks something of the responder (the hop trace tells requests from their answers). */
    private static boolean carriesRequest(LaneMessage frame) {
        PacketBatch batch = frame.getBatch();
        for (int i = 0; batch != null && i < batch.size(); i++) {
            switch (batch.get(i).getOpcode()) {
                case ACKNOWLEDGE, ATOMIC_ACKNOWLEDGE, READ_RESPONSE, CONNECTION_MANAGEMENT -> {
                }
                default -> {
                    return true;
                }
            }
        }
        return false;
    }

    /** An id a caller sent, cut short enough to quote in a log line or a status. */
    static String shown(String id) {
        return id.length() <= 64 ? id : id.substring(0, 64) + "... (" + id.length() + " characters)";
    }
}
