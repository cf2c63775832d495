package io.pagewire.node.nic;

/**
 * A queue pair's receive credits, in one place: what its peer granted it to spend on data that may
 * park in the peer's system buffer (the send ledger), and what it granted its peer from this node's
 * {@link CreditPool} (the receive ledger). A sender never spends credits it was not granted, and a
 * responder never grants credits its pool does not hold, so parked data never overruns a system
 * buffer. Guarded by the queue pair's lock.
 *
 * <p>A pair starts with the few credits one MTU-sized packet may need ({@link #perPacket}) and borrows
 * more from the pool, up to {@code pagewire.nic.creditsPerQp}, as data that spends them arrives; it
 * gives everything back once it can receive no more and nothing it parked is still waiting.
 */
final class Credits {
    /** The largest grant an address may claim: far more than any node grants, far less than overflow. */
    static final int MAX_INITIAL = 1 << 24;

    private final NicServices nic;
    private final CreditPool pool;
    /** Whose share of the pool this pair's credits count against. */
    private final String owner;
    private final int maxHeld;

    /** Send ledger: credits the peer granted in all, and spent of them. */
    private long grantedByPeer;
    private long spent;
    /**
     * Whether the peer's receive buffers may park a SEND (it said so in its last acknowledgement; until
     * the first, assumed): SENDs spend credits only then.
     */
    private boolean peerReceivesPark = true;
    /** When the current wait for credits began, or -1. */
    private long waitSinceNs = -1;

    /** Receive ledger: credits of the pool this pair holds, and those it granted its peer in all. */
    private int held;
    private long grantedToPeer;
    private boolean returned;

    /** A ledger holding {@code first} credits already reserved from the pool (the grant the pair's address names). */
    Credits(NicServices nic, CreditPool pool, String owner, int first, int maxHeld) {
        this.nic = nic;
        this.pool = pool;
        this.owner = owner;
        this.maxHeld = maxHeld;
        this.held = first;
        this.grantedToPeer = first;
    }

    /**
     * The credits one packet of {@code length} bytes may spend: the most page-sized parts it can touch
     * wherever it lands (a SEND's receive buffer is the responder's choice, so it is charged this much;
     * the responder grants back what it did not park, so the two agree without the sender knowing).
     */
    static int perPacket(int length, int pageShift) {
        return length == 0 ? 0 : (int) (((length + (1L << pageShift) - 2) >>> pageShift) + 1);
    }

    // ---- sending: the peer's grant ---------------------------------------------------------------------

    /** The grant the peer's address named, when the pair connects. */
    void connect(long initialGrant) {
        grantedByPeer = initialGrant;
    }

    /** An acknowledgement carried the peer's grant so far, and whether its receive buffers may park a SEND. */
    void peerGranted(long limit, boolean receivesPark) {
        grantedByPeer = Math.max(grantedByPeer, limit);
        peerReceivesPark = receivesPark;
    }

    /**
     * Whether a SEND spends credits: only where the peer's receive buffers may park it. A SEND that spent
     * none and would park anyway (a SHADOW region registered since the peer said otherwise) parks within
     * the credits the peer's pair holds, or is refused with an RNR NAK; it is never granted credits back.
     */
    boolean sendsSpend() {
        return peerReceivesPark;
    }

    /** Whether {@code parts} credits are there to spend; if not, a wait for them begins (counted once). */
    boolean canSpend(int parts) {
        if (grantedByPeer - spent >= parts) {
            return true;
        }
        if (waitSinceNs < 0) {
            waitSinceNs = nic.clock().nanoTime();
            nic.counters().increment(NicCounter.CREDIT_WAITS);
        }
        return false;
    }

    /** Spends {@code parts} credits on a first transmission, ending a wait for them. */
    void spend(int parts) {
        spent += parts;
        if (waitSinceNs >= 0) {
            nic.observers().waited(WaitCause.CREDITS, nic.clock().nanoTime() - waitSinceNs);
            waitSinceNs = -1;
        }
    }

    // ---- receiving: this node's grant to the peer ---------------------------------------------------------

    /** Everything granted to the peer so far: what every acknowledgement carries. */
    long grantedToPeer() {
        return grantedToPeer;
    }

    /** Grants the peer {@code n} more credits: parts placed directly, or parked parts now in place. */
    void grant(int n) {
        grantedToPeer += n;
    }

    /**
     * Data that spends credits arrived: borrows toward the pair's full share while the pool has free
     * slots, and grants what it borrowed.
     */
    void borrow() {
        int wanted = maxHeld - held;
        if (wanted <= 0 || returned) {
            return;
        }
        int lent = pool.lend(owner, wanted);
        held += lent;
        grantedToPeer += lent;
    }

    /** Whether one more part may park while {@code parked} are parked: no more than the credits this pair holds. */
    boolean mayPark(int parked) {
        return parked < held;
    }

    /** Credits of the pool this pair holds: what its sender may have parked at once. */
    int held() {
        return held;
    }

    /** Gives everything back to the pool, once (the pair can receive no more and nothing it parked waits). */
    void returnToPool() {
        if (!returned) {
            returned = true;
            pool.release(owner, held);
        }
    }

    /** What a failing test prints. */
    String describe() {
        return "credits spent " + spent + "/" + grantedByPeer + (waitSinceNs >= 0 ? " (waiting)" : "") + ", granted " + grantedToPeer
                + " holding " + held;
    }
}
