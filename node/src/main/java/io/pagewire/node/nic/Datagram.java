package io.pagewire.node.nic;

/**
 * One end of a UD datagram: where a UD SEND goes (its work request's address handle, remote QPN and
 * Q_Key) or where a UD receive came from. {@code lid} is the port address as programs name it;
 * {@code node} the node that answers to it, null until resolved or when no node does (such a
 * datagram is dropped and counted). {@code globalRoute} says the address handle was global, so the
 * receive's first 40 bytes hold a GRH and its completion says so.
 */
public record Datagram(String node, int lid, int qpn, int qkey, boolean globalRoute) {
    /** The same destination, sent to {@code nodeId} (null: no node has the LID). */
    public Datagram at(String nodeId) {
        return new Datagram(nodeId, lid, qpn, qkey, globalRoute);
    }

    /** The Q_Key bit that means "the sending pair's own Q_Key" in a work request (InfiniBand's controlled Q_Keys). */
    public static final int OWN_QKEY = 0x8000_0000;

    /** The bytes InfiniBand reserves at the start of every UD receive buffer for the GRH. */
    public static final int GRH_BYTES = 40;
}
