package io.pagewire.node.fabric;

import java.util.concurrent.atomic.AtomicLong;

/** Traffic and events on the link to one peer: what the metrics layer exports per link. */
public final class LinkStats {
    final AtomicLong packetsSent = new AtomicLong();
    final AtomicLong bytesSent = new AtomicLong();
    final AtomicLong batchesSent = new AtomicLong();
    final AtomicLong packetsReceived = new AtomicLong();
    final AtomicLong bytesReceived = new AtomicLong();
    final AtomicLong lanesOpened = new AtomicLong();
    final AtomicLong lanesLost = new AtomicLong();
    final AtomicLong unsentWhileDown = new AtomicLong();

    public long packetsSent() {
        return packetsSent.get();
    }

    /** Payload bytes sent. */
    public long bytesSent() {
        return bytesSent.get();
    }

    public long batchesSent() {
        return batchesSent.get();
    }

    public long packetsReceived() {
        return packetsReceived.get();
    }

    /** Payload bytes received. */
    public long bytesReceived() {
        return bytesReceived.get();
    }

    /** Lanes that completed their handshake, first connections and reconnections alike. */
    public long lanesOpened() {
        return lanesOpened.get();
    }

    public long lanesLost() {
        return lanesLost.get();
    }

    /** Packets dropped because no lane to the peer was up. */
    public long unsentWhileDown() {
        return unsentWhileDown.get();
    }
}
