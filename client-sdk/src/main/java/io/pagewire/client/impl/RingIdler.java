package io.pagewire.client.impl;

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
     * A sleeping agent looks again after this long even without a doorbell, so a lost one costs no
     * more. The property exists for tests that must see the doorbell work alone.
     */
    public static final String SLEEP_LIMIT_PROP_NAME = "pagewire.rings.sleepLimitNs";
    private static final long SLEEP_LIMIT_DEFAULT_NS = 50_000_000L;

    private final long spinNs;
    private final int maxYields;
    private final long napNs;
    private final long sleepLimitNs = Long.getLong(SLEEP_LIMIT_PROP_NAME, SLEEP_LIMIT_DEFAULT_NS);
    private long idleSinceNs = -1;
    private long nextNapNs = FIRST_NAP_NS;
    private int yields;

    public RingIdler(long spinNs, long napNs) {
        this(spinNs, YIELDS, napNs);
    }

    /** With a bell: yields, and how long the agent naps, before it sleeps (properties for measuring other choices). */
    private static final int BELL_YIELDS = Integer.getInteger("pagewire.rings.bellYields", 0);
    private static final long BELL_NAP_NS = Long.getLong("pagewire.rings.bellNapNs", 0);

    /**
     * An idler for an agent woken by {@link RingBell}s: a wake costs one write, so after its spin it
     * sleeps at once (no yields, no naps, unless the properties above say otherwise).
     */
    public static RingIdler withBells(long spinNs) {
        return new RingIdler(spinNs, BELL_YIELDS, BELL_NAP_NS);
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

    private RingIdler(long spinNs, int yields, long napNs) {
        this.spinNs = spinNs;
        this.maxYields = yields;
        this.napNs = napNs;
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
