package io.pagewire.node.cm;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** The node's rdma_cm ids by number and the ports of each port space they hold. Guarded by the manager's lock. */
final class CmIdTable {
    /** Where ephemeral ports (a bind to port 0, a connect without a bind) are taken from, as Linux's default range. */
    static final int FIRST_EPHEMERAL_PORT = 32768;
    static final int LAST_EPHEMERAL_PORT = 60999;

    private final String nodeId;
    private final Map<Integer, CmId> ids = new HashMap<>();
    /** Bound ports, by port space and port: the id holding each. */
    private final Map<Long, CmId> bound = new HashMap<>();
    private int nextId = 1;
    private int nextEphemeral = FIRST_EPHEMERAL_PORT;

    CmIdTable(String nodeId) {
        this.nodeId = nodeId;
    }

    /** A new id of the channel's, numbered uniquely on this node. */
    CmId add(CmChannel channel, int portSpace, int qpType) {
        CmId id = new CmId(nextId++, channel, portSpace, qpType);
        ids.put(id.id, id);
        return id;
    }

    /** The id a peer's message names, or null (it was destroyed, or never was). */
    CmId get(long number) {
        return number <= 0 || number > Integer.MAX_VALUE ? null : ids.get((int) number);
    }

    Collection<CmId> all() {
        return ids.values();
    }

    /** The channel's ids. */
    List<CmId> of(CmChannel channel) {
        return ids.values().stream().filter(id -> id.channel == channel).toList();
    }

    int size() {
        return ids.size();
    }

    /** The id listening on the port, or null. */
    CmId listenerAt(int portSpace, int port) {
        CmId id = bound.get(portKey(portSpace, port));
        return id != null && id.state == CmId.State.LISTEN ? id : null;
    }

    /** Takes a port of the id's port space for it: the one asked for, or the next free ephemeral one when 0. */
    void take(CmId id, int port) {
        if (port < 0 || port > 0xFFFF) {
            throw new CmException(CmException.Code.INVALID, "port " + port + " is out of range");
        }
        if (port == 0) {
            for (int tries = 0; tries <= LAST_EPHEMERAL_PORT - FIRST_EPHEMERAL_PORT; tries++) {
                int candidate = nextEphemeral;
                nextEphemeral = candidate == LAST_EPHEMERAL_PORT ? FIRST_EPHEMERAL_PORT : candidate + 1;
                if (!bound.containsKey(portKey(id.portSpace, candidate))) {
                    port = candidate;
                    break;
                }
            }
            if (port == 0) {
                throw new CmException(CmException.Code.ADDRESS_IN_USE, "every ephemeral port of the port space is taken");
            }
        } else if (bound.containsKey(portKey(id.portSpace, port))) {
            throw new CmException(CmException.Code.ADDRESS_IN_USE, "port " + port + " of port space 0x" + Integer.toHexString(id.portSpace)
                    + " is taken on node " + nodeId);
        }
        bound.put(portKey(id.portSpace, port), id);
        id.srcPort = port;
        id.ownsPort = true;
    }

    /** The id is gone: its number and its port are free. */
    void remove(CmId id) {
        if (id.srcPort != 0 && id.ownsPort) {
            bound.remove(portKey(id.portSpace, id.srcPort), id);
        }
        ids.remove(id.id);
    }

    private static long portKey(int portSpace, int port) {
        return ((long) portSpace << 16) | port;
    }
}
