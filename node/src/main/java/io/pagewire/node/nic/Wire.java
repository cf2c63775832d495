package io.pagewire.node.nic;

/**
 * The NIC's port to the wire as its queue pairs and outboxes see it ({@link PacketRouter} is it): where a
 * batch goes, whether a peer's lane takes data now, and a wait for one that does not.
 */
interface Wire {
    /** Where a multicast batch goes: this node and every peer whose link is up. */
    String ALL_NODES = "*";

    /** Sends a batch to {@code peer} (this node's own id: back in, over the loopback). */
    void transmit(String peer, int laneHint, PacketBatch batch);

    /** Sends a batch of multicast datagrams to this node and to every peer the transport reaches. */
    void multicast(int laneHint, PacketBatch batch);

    /** Whether the lane {@code laneHint} picks to {@code peer} takes data now. */
    boolean isWritable(String peer, int laneHint);

    /** Whether a datagram to {@code peer} has a way there: this node, or a peer whose link is up. */
    boolean reaches(String peer);

    /** {@code waiter} waits for a lane to {@code peer} that takes data: it is kicked once one does. */
    void waitForWritable(String peer, LinkWaiter waiter);

    /** A receive on this thread stalled the lane it came on for {@code nanos} (PIN_ON_MISS's pin). */
    void laneStalled(long nanos);

    /** What waits for a lane: kicked when the lane its hint picks takes data again. */
    interface LinkWaiter {
        int laneHint();

        void kick();
    }
}
