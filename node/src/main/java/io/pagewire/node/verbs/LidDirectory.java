package io.pagewire.node.verbs;

import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.nic.Lids;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which node answers to a LID: this node or one of its peers, as a UD address handle names them.
 * Answers are remembered; a LID no node has is looked up again each time, as a peer may join.
 */
final class LidDirectory {
    private final String nodeId;
    private final Fabric fabric;
    private final Map<Integer, String> known = new ConcurrentHashMap<>();

    LidDirectory(String nodeId, Fabric fabric) {
        this.nodeId = nodeId;
        this.fabric = fabric;
    }

    /** The node whose LID is {@code lid}, or null when none of the nodes this one knows has it. */
    String nodeOf(int lid) {
        String node = known.get(lid);
        if (node != null) {
            return node;
        }
        if (Lids.of(nodeId) == lid) {
            node = nodeId;
        } else {
            for (String peer : fabric.links().keySet()) {
                if (Lids.of(peer) == lid) {
                    node = peer;
                    break;
                }
            }
        }
        if (node != null) {
            known.put(lid, node);
        }
        return node;
    }
}
