package io.pagewire.node.loop;

import io.grpc.netty.shaded.io.netty.channel.SelectStrategy;
import io.grpc.netty.shaded.io.netty.util.IntSupplier;
import java.util.ArrayList;

/**
 * One event loop's duty cycle: at the start of every pass, before the loop looks at its sockets,
 * each {@link Poller} that asked for a turn gets exactly one (a session's request ring, say), the way
 * Aeron's conductor polls its clients' command buffers between its other duties. Then it decides how
 * the loop waits: not at all while pollers or tasks want more; in latency mode by polling the sockets,
 * yielding between looks, for {@code spinNs} of idleness; otherwise by blocking until a socket or a
 * task wakes it.
 *
 * <p>Why not tasks: a poller that re-queued itself as a task would be run again and again inside one
 * task pass (Netty runs tasks added during the pass for up to a second), and the loop's sockets,
 * which carry the peers' packets and acknowledgements, would not be read meanwhile. A poller here
 * gets one turn per pass, and every pass reads the sockets.
 *
 * <p>Confined to its loop: {@link #again} and {@link #onThisLoop} are called on the loop's thread.
 */
public final class LoopDutyCycle implements SelectStrategy {
    /** Work the loop polls between passes over its sockets. */
    public interface Poller {
        /** One turn; a poller that wants another calls {@link #again} before it returns. */
        void poll();
    }

    private static final System.Logger LOG = System.getLogger(LoopDutyCycle.class.getName());
    private static final ThreadLocal<LoopDutyCycle> ON_THIS_LOOP = new ThreadLocal<>();

    private final long spinNs;
    /** Pollers to turn at the next pass; swapped with {@link #turning} at the start of each. */
    private ArrayList<Poller> due = new ArrayList<>();
    private ArrayList<Poller> turning = new ArrayList<>();
    private long idleSinceNs = -1;
    private boolean bound;

    /** @param spinNs how long an idle loop polls its sockets before it blocks; 0 blocks at once */
    LoopDutyCycle(long spinNs) {
        this.spinNs = spinNs;
    }

    /** The duty cycle of the loop the calling thread runs, or null when it runs none (a loop not made by {@link NodeEventLoops}). */
    public static LoopDutyCycle onThisLoop() {
        return ON_THIS_LOOP.get();
    }

    /** Gives {@code poller} one turn at the start of the loop's next pass. On the loop only. */
    public void again(Poller poller) {
        due.add(poller);
    }

    @Override
    public int calculateStrategy(IntSupplier selectNow, boolean hasTasks) throws Exception {
        if (!bound) {
            ON_THIS_LOOP.set(this);
            bound = true;
        }
        boolean turned = turnDuePollers();
        if (hasTasks || turned || !due.isEmpty()) {
            // What the pollers did may have queued tasks (a lane's flush): look at the sockets without
            // waiting, and come back at once.
            idleSinceNs = -1;
            return selectNow.get();
        }
        if (spinNs == 0) {
            return SelectStrategy.SELECT;
        }
        int ready = selectNow.get();
        if (ready > 0) {
            idleSinceNs = -1;
            return ready;
        }
        long now = System.nanoTime();
        if (idleSinceNs < 0) {
            idleSinceNs = now;
        }
        if (now - idleSinceNs < spinNs) {
            // Yield, not a spin hint: a 2-core machine runs more pollers than cores, and the one
            // that has the work must get a core within microseconds, not a time slice.
            Thread.yield();
            return SelectStrategy.CONTINUE;
        }
        idleSinceNs = -1;
        return SelectStrategy.SELECT;
    }

    /** Turns every poller that asked for this pass; true if there was any. */
    private boolean turnDuePollers() {
        if (due.isEmpty()) {
            return false;
        }
        ArrayList<Poller> now = due;
        due = turning;
        turning = now;
        try {
            for (int i = 0; i < now.size(); i++) {
                try {
                    now.get(i).poll();
                } catch (RuntimeException e) {
                    // A poller's bug must not stop the loop that carries every lane of the node.
                    LOG.log(System.Logger.Level.WARNING, "a poller on " + Thread.currentThread().getName() + " failed a turn", e);
                }
            }
        } finally {
            now.clear();
        }
        return true;
    }
}
