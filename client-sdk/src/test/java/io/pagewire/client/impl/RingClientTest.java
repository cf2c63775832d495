package io.pagewire.client.impl;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.ring.CounterRecord;
import io.pagewire.ring.RingBell;
import io.pagewire.ring.RingIdler;
import io.pagewire.ring.SessionRings;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongConsumer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The application's half of the rings against a node played by the test: the agent when its node
 * closes the bell (it keeps sleeping, no spin, and the stream wakes it), and threads that block for
 * an event (they handle the events and sleep on the bell themselves, one at a time).
 */
@Timeout(30)
class RingClientTest {
    @TempDir
    Path directory;
    /** Only a doorbell may wake a sleeper in these tests (the safety timeout is an hour): a lost one hangs the test until its timeout. */
    private static final long ONLY_DOORBELLS_WAKE_NS = TimeUnit.HOURS.toNanos(1);

    /** Events of which only counter changes matter, handed to {@code changed}. */
    private static RingClient.Events counterEvents(LongConsumer changed) {
        return new RingClient.Events() {
            @Override
            public void completed(long wrId, int qpn, int opcode, int status, long bytes, long value, String error, boolean hasImmediate,
                    int immediate) {
            }

            @Override
            public void refused(int qpn, long wrId, int code, String error) {
            }

            @Override
            public void counterChanged(int counterId, long value) {
                changed.accept(value);
            }

            @Override
            public void faultServed(long token, int status, String error) {
            }
        };
    }

    @Test
    void anAgentWhoseBellTheNodeClosedSleepsAndIsWokenOnTheStream() throws Exception {
        Path path = directory.resolve("node-1-3.rings");
        SessionRings rings = SessionRings.create(path, 4096, 1);
        ConcurrentLinkedQueue<Long> counterValues = new ConcurrentLinkedQueue<>();
        AtomicInteger streamDoorbells = new AtomicInteger();
        String name = "pagewire-sdk-ring-test-" + System.nanoTime();
        try (NodeBell nodeBell = NodeBell.of(path)) {
            RingBell bell = nodeBell.bell();
            SocketChannel nodeEnd = nodeBell.nodeEnd();
            RingClient client = new RingClient(rings, counterEvents(counterValues::add), streamDoorbells::incrementAndGet, false,
                    ONLY_DOORBELLS_WAKE_NS, name, bell);
            try {
                Thread agent = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals(name)).findFirst().orElseThrow();
                nodeEnd.close();
                awaitAsleep(agent, "the agent, after its bell closed");

                ThreadMXBean threads = ManagementFactory.getThreadMXBean();
                long cpuBefore = threads.getThreadCpuTime(agent.getId());
                Thread.sleep(500);
                long cpuNs = threads.getThreadCpuTime(agent.getId()) - cpuBefore;
                // A spinning agent takes most of the 500 ms; a sleeping one next to nothing.
                assertThat(cpuNs).as("agent CPU in 500 ms after its bell closed, ns").isLessThan(100_000_000L);

                rings.nodeAsleep(true);
                client.post(1, List.of(), new long[0], System.nanoTime() + TimeUnit.SECONDS.toNanos(5));
                assertThat(streamDoorbells.get()).as("a post to a sleeping node rings on the stream once the bell is gone").isEqualTo(1);

                UnsafeBuffer record = new UnsafeBuffer(new byte[CounterRecord.LENGTH]);
                CounterRecord.put(record, 0, 7, 42);
                assertThat(rings.events().write(CounterRecord.TYPE, record, 0, CounterRecord.LENGTH)).isTrue();
                client.wake(); // what the stream's doorbell does
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (counterValues.isEmpty() && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                assertThat(counterValues).as("the stream's wake reached the sleeping agent").containsExactly(42L);
            } finally {
                client.close();
            }
        }
    }

    /**
     * A thread blocked for an event is the one the node's doorbell wakes, and it handles the event
     * itself (as an ibverbs application blocked on its completion channel): no agent wakes it. A
     * second thread that blocks meanwhile waits on its future, which the first completes; once both
     * are gone the agent handles events again. Only doorbells wake a sleeper here (the safety
     * timeout is an hour), so a lost one fails the test at its timeout.
     */
    @Test
    void aBlockedThreadSleepsOnTheBellAndHandlesItsEventsItself() throws Exception {
        Path path = directory.resolve("node-1-4.rings");
        SessionRings rings = SessionRings.create(path, 4096, 1);
        Map<Long, CompletableFuture<Thread>> handledOn = new ConcurrentHashMap<>();
        for (long value = 1; value <= 3; value++) {
            handledOn.put(value, new CompletableFuture<>());
        }
        String name = "pagewire-sdk-ring-test-" + System.nanoTime();
        try (NodeBell nodeBell = NodeBell.of(path)) {
            RingBell bell = nodeBell.bell();
            SocketChannel nodeEnd = nodeBell.nodeEnd();
            RingClient client = new RingClient(rings, counterEvents(value -> handledOn.get(value).complete(Thread.currentThread())), () -> {
            }, false, ONLY_DOORBELLS_WAKE_NS, name, bell);
            try {
                CompletableFuture<Thread> first = handledOn.get(1L);
                CompletableFuture<Thread> second = handledOn.get(2L);
                Thread leader = new Thread(() -> client.await(first, RingClient.NO_DEADLINE), "waiter-1");
                leader.start();
                awaitSleepingOnTheBell(leader);
                Thread follower = new Thread(() -> client.await(second, RingClient.NO_DEADLINE), "waiter-2");
                follower.start();
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (follower.getState() != Thread.State.WAITING && System.nanoTime() < deadline) {
                    Thread.sleep(1);
                }
                assertThat(follower.getState()).as("the second waiter waits on its future").isEqualTo(Thread.State.WAITING);

                writeCounter(rings, nodeEnd, 2);
                follower.join(10_000);
                assertThat(follower.isAlive()).as("the second waiter returned").isFalse();
                assertThat(second.get()).as("the thread that handled the event the second waiter wanted").isSameAs(leader);
                assertThat(leader.isAlive()).as("the first waiter still waits for its own event").isTrue();

                awaitSleepingOnTheBell(leader);
                writeCounter(rings, nodeEnd, 1);
                leader.join(10_000);
                assertThat(leader.isAlive()).as("the first waiter returned").isFalse();
                assertThat(first.get()).as("the thread that the doorbell woke").isSameAs(leader);

                // Nobody waits: the agent takes the bell again and handles what comes.
                Thread agent = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals(name)).findFirst().orElseThrow();
                awaitSleepingOnTheBell(agent);
                writeCounter(rings, nodeEnd, 3);
                assertThat(handledOn.get(3L).get(10, TimeUnit.SECONDS)).as("the thread that handled an event with no waiter").isSameAs(agent);
            } finally {
                client.close();
            }
        }
    }

    /**
     * A waiter whose future is never completed returns at its deadline; one whose interrupt status is
     * set waits as long (a join is not ended by an interrupt either), sleeping, not spinning, and
     * keeps the status.
     */
    @Test
    void aBlockedThreadReturnsAtItsDeadlineAndAnInterruptNeitherEndsNorSpinsIt() throws Exception {
        Path path = directory.resolve("node-1-5.rings");
        SessionRings rings = SessionRings.create(path, 4096, 1);
        RingClient client = new RingClient(rings, counterEvents(value -> {
        }), () -> {
        }, false, ONLY_DOORBELLS_WAKE_NS, "pagewire-sdk-ring-test-" + System.nanoTime(), null);
        try {
            for (boolean interrupt : new boolean[] {false, true}) {
                CompletableFuture<Void> never = new CompletableFuture<>();
                long[] tookMs = new long[1];
                boolean[] stillInterrupted = new boolean[1];
                Thread waiter = new Thread(() -> {
                    if (interrupt) {
                        Thread.currentThread().interrupt();
                    }
                    long start = System.nanoTime();
                    client.await(never, start + TimeUnit.MILLISECONDS.toNanos(300));
                    tookMs[0] = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                    stillInterrupted[0] = Thread.currentThread().isInterrupted();
                });
                ThreadMXBean threads = ManagementFactory.getThreadMXBean();
                waiter.start();
                awaitAsleep(waiter, "the waiter (interrupted: " + interrupt + ")");
                long cpuBefore = threads.getThreadCpuTime(waiter.getId());
                Thread.sleep(100);
                long cpuNs = threads.getThreadCpuTime(waiter.getId()) - cpuBefore;
                waiter.join(10_000);
                assertThat(never).isNotDone();
                assertThat(tookMs[0]).as("ms until the waiter returned (interrupted: %s)", interrupt).isBetween(290L, 5_000L);
                assertThat(stillInterrupted[0]).as("interrupt status after the wait").isEqualTo(interrupt);
                // A spinning waiter takes most of the 100 ms (whatever its status); a sleeping one next to nothing.
                assertThat(cpuNs).as("waiter CPU in 100 ms of its wait, ns (interrupted: %s)", interrupt).isLessThan(50_000_000L);
            }
        } finally {
            client.close();
        }
    }

    /**
     * Waits until {@code thread} blocks (parked, waiting, or in a blocking read, which Java shows as RUNNABLE
     * in native code, so its CPU time is looked at instead: still for 20 ms), at most 10 s: the event a
     * "it sleeps" check starts from, instead of a guess at how long the thread takes to get there.
     */
    private static void awaitAsleep(Thread thread, String what) throws InterruptedException {
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        long stillSince = System.nanoTime();
        long cpu = threads.getThreadCpuTime(thread.getId());
        while (true) {
            Thread.State state = thread.getState();
            if (state == Thread.State.WAITING || state == Thread.State.TIMED_WAITING) {
                return;
            }
            long now = threads.getThreadCpuTime(thread.getId());
            if (now != cpu) {
                cpu = now;
                stillSince = System.nanoTime();
            } else if (System.nanoTime() - stillSince > TimeUnit.MILLISECONDS.toNanos(20)) {
                return;
            }
            assertThat(System.nanoTime() - deadline).as("%s is %s and using CPU after 10 s", what, state).isNegative();
            Thread.sleep(1);
        }
    }

    /** The node's side of the bell of a ring file: its listening socket, and its end of the application's connection. */
    private record NodeBell(ServerSocketChannel server, SocketChannel nodeEnd, RingBell bell) implements AutoCloseable {
        static NodeBell of(Path rings) throws Exception {
            ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX);
            server.bind(UnixDomainSocketAddress.of(RingBell.pathFor(rings)));
            RingBell bell = RingBell.connect(rings);
            assertThat(bell).isNotNull();
            return new NodeBell(server, server.accept(), bell);
        }

        @Override
        public void close() throws Exception {
            nodeEnd.close();
            server.close();
        }
    }

    /** What the node does when it has an event: writes it on the event ring, and rings if the application sleeps. */
    private static void writeCounter(SessionRings rings, SocketChannel nodeEnd, long value) throws Exception {
        UnsafeBuffer record = new UnsafeBuffer(new byte[CounterRecord.LENGTH]);
        CounterRecord.put(record, 0, 7, value);
        assertThat(rings.events().write(CounterRecord.TYPE, record, 0, CounterRecord.LENGTH)).isTrue();
        if (rings.takeAppAsleep()) {
            nodeEnd.write(ByteBuffer.wrap(new byte[] {1}));
        }
    }

    /** Waits until {@code thread} sleeps in the bell's selector. */
    private static void awaitSleepingOnTheBell(Thread thread) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            for (StackTraceElement frame : thread.getStackTrace()) {
                if (frame.getMethodName().equals("sleepOnBell")) {
                    return;
                }
            }
            Thread.sleep(1);
        }
        throw new AssertionError(thread.getName() + " did not go to sleep on the bell within 10 s: " + List.of(thread.getStackTrace()));
    }
}
