package io.pagewire.ring;

import java.util.concurrent.locks.LockSupport;

/**
 * How an application's ring agent waits when its rings are empty: it polls for {@code spinNs},
 * yielding the core between looks (on a 2-core machine a spinning agent would otherwise starve the
 * node threads it waits for until the scheduler's next tick, milliseconds later), then yields a
 * hundred times more, then naps with a doubling back-off (1 µs up to 100 µs) until it has been idle
 * for {@code napNs}, so that
 * work arriving at a steady pace is picked up without a doorbell; only then it marks itself asleep in
 * the ring headers, looks once more, and sleeps until a writer rings the doorbell (which costs that
 * writer a message on the session stream). A truly idle agent thus burns no CPU, and a busy one pays
 * no doorbells.
 */
public final class RingIdler {
    /** What the idler needs of its agent. */
    public interface Agent {
        /** Marks the agent asleep (true) or awake (false) in every ring header it serves. */
        void asleep(boolean value);

        /** One more look at the rings (doing what is there); the number of records handled. */
        int poll();

        /** Sleeps until a doorbell or {@code maxNs}; by default a park that the doorbell's unpark ends. */
        default void sleep(long maxNs) {
            LockSupport.parkNanos(this, maxNs);
        }
    }

    private static final int YIELDS = 100;
    private static final long FIRST_NAP_NS = 1_000;
    private static final long LONGEST_NAP_NS = 100_000;
    /**
     * How long a sleeping agent goes without a look at its rings when no doorbell wakes it, unless
     * told otherwise: a lost doorbell costs no more.
     */
    public static final long SLEEP_LIMIT_DEFAULT_NS = 50_000_000L;

    private final long spinNs;
    private final int maxYields;
    private final long napNs;
    private final long sleepLimitNs;
    private long idleSinceNs = -1;
    private long nextNapNs = FIRST_NAP_NS;
    private int yields;

    /**
     * An idler for an agent woken by doorbells on its session stream, which cost the writer a message:
     * it yields and naps for {@code napNs} before it sleeps.
     *
     * @param sleepLimitNs the longest it sleeps without a doorbell
     */
    public RingIdler(long spinNs, long napNs, long sleepLimitNs) {
        this(spinNs, YIELDS, napNs, sleepLimitNs);
    }

    /** An idler for an agent woken by {@link RingBell}s: a wake costs one write, so after its spin it sleeps at once. */
    public static RingIdler withBells(long spinNs, long sleepLimitNs) {
        return new RingIdler(spinNs, 0, 0, sleepLimitNs);
    }

    /**
     * One step of a bounded busy wait that started at some time: a spin hint until
     * {@code spinUntilNs}, a yield after, so that on a small machine the waiter does not starve the
     * threads that bring what it waits for.
     */
    public static void backOff(long spinUntilNs) {
        if (System.nanoTime() - spinUntilNs < 0) {
            Thread.onSpinWait();
        } else {
            Thread.yield();
        }
    }

    private RingIdler(long spinNs, int yields, long napNs, long sleepLimitNs) {
        this.spinNs = spinNs;
        this.maxYields = yields;
        this.napNs = napNs;
        this.sleepLimitNs = sleepLimitNs;
    }

    /** The agent found work: the next idle period starts from spinning again. */
    public void reset() {
        idleSinceNs = -1;
        nextNapNs = FIRST_NAP_NS;
        yields = 0;
    }

    /** The agent found nothing to do: spin, nap or sleep, as long as it has been idle says. */
    public void idle(Agent agent) {
        long now = System.nanoTime();
        if (idleSinceNs < 0) {
            idleSinceNs = now;
        }
        long idleForNs = now - idleSinceNs;
        if (idleForNs < spinNs) {
            // Polling yields between looks: where pollers outnumber cores (2 cores, two nodes and an
            // application), the one with work gets a core at once instead of after a time slice.
            Thread.yield();
            return;
        }
        if (yields < maxYields) {
            yields++;
            Thread.yield();
            return;
        }
        if (idleForNs < spinNs + napNs) {
            LockSupport.parkNanos(this, nextNapNs);
            nextNapNs = Math.min(nextNapNs * 2, LONGEST_NAP_NS);
            return;
        }
        agent.asleep(true);
        try {
            if (agent.poll() == 0) {
                agent.sleep(sleepLimitNs);
            }
        } finally {
            agent.asleep(false);
        }
        reset();
    }
}
