package io.pagewire.node.cm;

/** What the connection manager did, for the node's meters. Written under the manager's lock; read racily by meters. */
public final class CmCounters {
    volatile long channelsOpened;
    volatile long addressQueries;
    volatile long addressErrors;
    volatile long requestsSent;
    volatile long requestsReceived;
    volatile long established;
    volatile long rejectsSent;
    volatile long rejectsReceived;
    volatile long unreachable;
    volatile long connectErrors;
    volatile long disconnectsSent;
    volatile long disconnectsReceived;
    volatile long resent;
    volatile long events;
    volatile long malformed;

    public long channelsOpened() {
        return channelsOpened;
    }

    public long requestsSent() {
        return requestsSent;
    }

    public long requestsReceived() {
        return requestsReceived;
    }

    public long established() {
        return established;
    }

    public long rejects() {
        return rejectsSent + rejectsReceived;
    }

    public long unreachable() {
        return unreachable;
    }

    public long disconnects() {
        return disconnectsSent + disconnectsReceived;
    }

    public long resent() {
        return resent;
    }

    public long addressErrors() {
        return addressErrors;
    }

    public long malformed() {
        return malformed;
    }
}
