package io.pagewire.node.nic;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The NIC's queue pairs by number, and the UD pairs attached to each multicast group: where an arriving
 * packet's destination is looked up.
 */
final class QueuePairTable {
    private final Map<Integer, QueuePair> byQpn = new ConcurrentHashMap<>();
    /** Multicast groups by LID: the UD pairs of this NIC attached to each. */
    private final Map<Integer, Set<QueuePair>> multicastGroups = new ConcurrentHashMap<>();

    QueuePair get(int qpn) {
        return byQpn.get(qpn);
    }

    List<QueuePair> all() {
        return List.copyOf(byQpn.values());
    }

    /** {@code qp} answers to its number from now on (a reset pair's fresh successor replaces it). */
    void put(QueuePair qp) {
        byQpn.put(qp.qpn(), qp);
    }

    /** {@code qp} closed: it answers to nothing any more. */
    void remove(QueuePair qp) {
        byQpn.remove(qp.qpn(), qp);
        for (Set<QueuePair> members : multicastGroups.values()) {
            members.remove(qp);
        }
    }

    /** Adds a UD pair to multicast group {@code lid}; false when it was a member already. */
    boolean attach(QueuePair qp, int lid) {
        return multicastGroups.computeIfAbsent(lid, l -> ConcurrentHashMap.newKeySet()).add(qp);
    }

    /** Takes a UD pair out of multicast group {@code lid}; false when it was not a member. */
    boolean detach(QueuePair qp, int lid) {
        Set<QueuePair> members = multicastGroups.get(lid);
        return members != null && members.remove(qp);
    }

    /** The pairs attached to multicast group {@code lid}. */
    Set<QueuePair> multicastMembers(int lid) {
        Set<QueuePair> members = multicastGroups.get(lid);
        return members == null ? Set.of() : members;
    }
}
