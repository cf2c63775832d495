package io.pagewire.systemtests.verbs;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.WorkRequest;
import io.pagewire.systemtests.ClusterChecks;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** User-level access: a co-located application's posts, completions and counter changes on shared-memory rings. */
class SharedMemoryRingsTest extends SdkFixture {
    @TempDir
    Path rings;

    /** The sessions' ring files: each node makes them in its own directory of the ring directory. */
    private List<Path> ringFiles() throws IOException {
        try (Stream<Path> files = Files.walk(rings)) {
            return files.filter(p -> p.getFileName().toString().endsWith(".rings")).toList();
        }
    }

    /**
     * A thread that busy-polls its endpoint handles what the node delivers itself (as an ibverbs
     * application polling its completion queue): the completions' callbacks run on the polling
     * thread, with no hand-off between the node and it.
     */
    @Test
    void aThreadThatPollsItsEndpointHandlesItsCompletionsItself() throws Exception {
        PinnedPages pages = pinnedPages();
        Endpoint a = pages.a();
        Thread me = Thread.currentThread();
        int writes = 50;
        int handledHere = 0;
        a.poll();
        for (int i = 0; i < writes; i++) {
            CompletableFuture<Thread> handledOn = pages.qp().write(pages.local(), pages.local().address(), 64, pages.remote().address(),
                    pages.remote().rkey()).thenApply(c -> Thread.currentThread());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (!handledOn.isDone() && System.nanoTime() < deadline) {
                a.poll();
            }
            if (handledOn.get(1, TimeUnit.SECONDS) == me) {
                handledHere++;
            }
        }
        // The ring's agent takes one now and then (it looks too, and a bell the node rang while it
        // slept wakes it); most are the polling thread's.
        assertThat(handledHere).as("completions handled on the polling thread, of " + writes).isGreaterThanOrEqualTo(writes / 2);
        assertThat(connect(cluster.node(1)).openEndpoint("no-rings-needed").poll()).as("nothing delivered yet").isZero();
    }

    @Test
    void pollingACounterReadsLocalMemoryWithNoCallToTheNode() throws Exception {
        PinnedPages pages = pinnedPages();
        QueuePair qp = pages.qp();
        EventCounter arrived = pages.b().createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        assertThat(arrived.poll()).as("the first poll subscribes").isZero();
        double readsBefore = counterReads();
        int writes = 20;
        for (int i = 1; i <= writes; i++) {
            qp.await(qp.writeWithNotify(pages.local(), pages.local().address(), 8, pages.remote().address(), pages.remote().rkey(), arrived.id()));
            int expected = i;
            awaitTrue(() -> arrived.poll() == expected, 5_000, "a poll sees notification " + i);
        }
        assertThat(counterReads()).as("ReadEventCounter calls the polls made").isEqualTo(readsBefore);
        assertThat(arrived.value()).isEqualTo(writes);
        assertThat(counterReads()).as("value() asks the node").isGreaterThan(readsBefore);
    }

    /** A page on each of two nodes, registered PINNED, and a queue pair from the first to the second. */
    private record PinnedPages(Endpoint a, Endpoint b, MemoryRegion local, MemoryRegion remote, QueuePair qp) {
    }

    private PinnedPages pinnedPages() {
        start(2, c -> c.verbs().ringDirectory(rings));
        Endpoint a = connect(cluster.node(1)).openEndpoint("a");
        Endpoint b = connect(cluster.node(2)).openEndpoint("b");
        MemoryRegion local = a.register(a.allocate(4096), 4096, RegistrationMode.PINNED, Access.all());
        MemoryRegion remote = b.register(b.allocate(4096), 4096, RegistrationMode.PINNED, Access.all());
        return new PinnedPages(a, b, local, remote, a.connect(b));
    }

    /** ReadEventCounter calls node 2 has received, from its gRPC meters. */
    private double counterReads() {
        return cluster.node(2).registry().scrape().lines()
                .filter(l -> l.startsWith("grpc_server_requests_received_messages_total") && l.contains("ReadEventCounter"))
                .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))).sum();
    }

    @Test
    void aSessionGetsItsRingsAndTheNodeDeletesThemWhenItEnds() throws Exception {
        start(2, c -> c.verbs().ringDirectory(rings));
        Endpoint a = connect(cluster.node(1)).openEndpoint("a");
        Endpoint b = connect(cluster.node(2)).openEndpoint("b");
        assertThat(ringFiles()).as("one ring file per session").hasSize(2);
        assertThat(sessionsOnRings(1)).as("node-1's gauge of sessions on rings").isEqualTo(1);
        track(Pagewire.connect(cluster.node(1).target(), connectOptions().withSharedMemory(false))).openEndpoint("remote");
        assertThat(sessionsOnRings(1)).as("a session on its stream is not on rings").isEqualTo(1);
        for (Path file : ringFiles()) {
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(file)))
                    .as("whoever maps a session's rings can post as that session: owner only").isEqualTo("rw-------");
        }
        byte[] data = new byte[3 * 4096 + 17];
        new Random(7).nextBytes(data);
        long src = a.allocate(data.length);
        a.store(src, data);
        long dst = b.allocate(data.length);
        MemoryRegion local = a.register(src, data.length, RegistrationMode.ON_DEMAND, Access.all());
        MemoryRegion remote = b.register(dst, data.length, RegistrationMode.SHADOW, Access.all());
        EventCounter arrived = b.createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        List<Long> seen = new CopyOnWriteArrayList<>();
        AutoCloseable watch = arrived.onChange(seen::add);
        QueuePair qp = a.connect(b);
        Completion done = qp.await(qp.writeWithNotify(local, src, data.length, dst, remote.rkey(), arrived.id()));
        assertThat(done.bytes()).isEqualTo(data.length);
        assertThat(arrived.await(1, Duration.ofSeconds(10))).isEqualTo(1);
        assertThat(b.load(dst, data.length)).isEqualTo(data);
        awaitTrue(() -> seen.contains(1L), 10_000, "the counter change arrived on the event ring");
        watch.close();
        qp.close();
        a.close();
        b.close();
        awaitTrue(() -> {
            try {
                return ringFiles().isEmpty() && bellFiles(rings).isEmpty();
            } catch (IOException e) {
                return false;
            }
        }, 10_000, "the node deleted the ring and bell files of ended sessions");
    }

    @Test
    void postsWaitForRoomOnAFullRingAndNoneIsLost() throws Exception {
        // The smallest ring holds about 70 posted work requests: 5,000 in lists of 100 must wait for room.
        start(2, c -> c.verbs().ringDirectory(rings).ringBytes(4096));
        Endpoint a = connect(cluster.node(1)).openEndpoint("a");
        Endpoint b = connect(cluster.node(2)).openEndpoint("b");
        int slot = 64;
        int count = 5_000;
        long src = a.allocate(slot * 100L);
        long dst = b.allocate((long) slot * count);
        MemoryRegion local = a.register(src, slot * 100L, RegistrationMode.PINNED, Access.all());
        MemoryRegion remote = b.register(dst, (long) slot * count, RegistrationMode.PINNED, Access.all());
        for (int i = 0; i < 100; i++) {
            a.store(src + (long) i * slot, new byte[] {(byte) i, (byte) (i >> 8)});
        }
        QueuePair qp = a.connect(b);
        List<CompletableFuture<Completion>> futures = new ArrayList<>();
        for (int list = 0; list < count / 100; list++) {
            List<WorkRequest> requests = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                requests.add(WorkRequest.write(local, src + (long) i * slot, slot, dst + (long) (list * 100 + i) * slot, remote.rkey()));
            }
            futures.addAll(qp.post(requests));
        }
        long last = -1;
        for (CompletableFuture<Completion> future : futures) {
            Completion c = qp.await(future);
            assertThat(c.wrId()).as("completions in posting order").isGreaterThan(last);
            last = c.wrId();
        }
        for (int i = 0; i < count; i += 499) {
            byte[] word = b.load(dst + (long) i * slot, 2);
            assertThat(word).as("slot " + i).containsExactly((byte) (i % 100), (byte) ((i % 100) >> 8));
        }
        qp.close();
    }

    private List<Path> bellFiles(Path directory) throws IOException {
        try (Stream<Path> files = Files.walk(directory)) {
            return files.filter(p -> p.getFileName().toString().endsWith(".bell")).toList();
        }
    }

    /**
     * Doorbells over the bells (a Unix-domain socket beside each ring file), and over the session
     * stream when a bell cannot be made: here a ring directory whose socket paths would pass the
     * 108-byte limit of Linux.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"bells", "stream doorbells"})
    void sleepingAgentsAreWokenByTheirDoorbellsAlone(String doorbells) throws Exception {
        withDoorbellsAlone(() -> {
            OnePagePair pair = startWith(doorbells);
            Endpoint a = pair.a();
            Endpoint b = pair.b();
            EventCounter arrived = b.createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
            List<Long> seen = new CopyOnWriteArrayList<>();
            AutoCloseable watch = arrived.onChange(seen::add);
            QueuePair qp = a.connect(b);
            for (int i = 1; i <= 5; i++) {
                Thread.sleep(20); // long enough for every ring agent to go to sleep (it naps for at most 2 ms first)
                a.store(pair.src(), new byte[] {(byte) i});
                // A bounded wait: a lost doorbell must fail the test, not hang it.
                qp.writeWithNotify(pair.local(), pair.src(), 1, pair.dst(), pair.remote().rkey(), arrived.id()).get(20, TimeUnit.SECONDS);
                long value = i;
                awaitTrue(() -> seen.contains(value), 20_000, "counter change " + value + " reached the sleeping handler agent");
                assertThat(b.load(pair.dst(), 1)).containsExactly((byte) i);
            }
            watch.close();
            qp.close();
        });
    }

    /**
     * A thread blocked in a counter's {@code await} or a queue pair's {@code await} sleeps on the
     * doorbell itself and handles the events it is woken for (an ibverbs application blocked on its
     * completion channel): the counter's handler runs on the waiting thread, not on an agent that
     * would then have to wake it. Only doorbells wake sleepers here, so a lost one hangs the wait
     * until the test's timeout.
     */
    @ParameterizedTest(name = "{0}")
    @ValueSource(strings = {"bells", "stream doorbells"})
    void aBlockedThreadIsWokenByTheDoorbellAndHandlesItsEventsItself(String doorbells) throws Exception {
        withDoorbellsAlone(() -> {
            OnePagePair pair = startWith(doorbells);
            Endpoint a = pair.a();
            Endpoint b = pair.b();
            EventCounter arrived = b.createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
            Map<Long, Thread> handledOn = new ConcurrentHashMap<>();
            AutoCloseable watch = arrived.onChange(value -> handledOn.put(value, Thread.currentThread()));
            QueuePair qp = a.connect(b);
            for (int i = 1; i <= 3; i++) {
                long target = i;
                CompletableFuture<Long> reached = new CompletableFuture<>();
                Thread waiter = new Thread(() -> {
                    try {
                        reached.complete(arrived.await(target, Duration.ofSeconds(60)));
                    } catch (RuntimeException e) {
                        reached.completeExceptionally(e);
                    }
                }, "counter-waiter-" + i);
                waiter.start();
                awaitTrue(() -> Stream.of(waiter.getStackTrace()).anyMatch(f -> f.getMethodName().equals("sleepOnBell")), 20_000,
                        "the waiter sleeps on its endpoint's doorbell");
                a.store(pair.src(), new byte[] {(byte) i});
                Completion written = qp.await(qp.writeWithNotify(pair.local(), pair.src(), 1, pair.dst(), pair.remote().rkey(), arrived.id()));
                assertThat(written.bytes()).as("write %d: %s", i, written).isEqualTo(1);
                assertThat(reached.get(20, TimeUnit.SECONDS)).as("the counter's value when the wait ended").isEqualTo(i);
                assertThat(handledOn.get(target)).as("the thread that handled change %d", i).isSameAs(waiter);
                waiter.join(10_000);
                assertThat(b.load(pair.dst(), 1)).containsExactly((byte) i);
                Thread.sleep(20); // every sleeper asleep again before the next round
            }
            assertThat(arrived.await(4, Duration.ofMillis(200))).as("a wait that times out returns the value then").isEqualTo(3);
            watch.close();
            qp.close();
        });
    }

    /** What a doorbell test's body does. */
    private interface DoorbellTest {
        void run() throws Exception;
    }

    /**
     * Runs {@code test} with the sleepers' safety timeout an hour long: only a doorbell can wake a
     * sleeping agent or waiter, so a lost one hangs the test until its timeout.
     */
    private void withDoorbellsAlone(DoorbellTest test) throws Exception {
        doorbellsAlone = true;
        try {
            test.run();
        } finally {
            doorbellsAlone = false;
        }
    }

    /** Whether the nodes' and the applications' sleeping ring readers wait an hour for a doorbell (see {@link #withDoorbellsAlone}). */
    private boolean doorbellsAlone;

    @Override
    protected ConnectOptions connectOptions() {
        return doorbellsAlone ? super.connectOptions().withRingSleepLimit(Duration.ofHours(1)) : super.connectOptions();
    }

    /** Two nodes whose sessions ring over bells ("bells") or over their streams (a ring directory too long for a socket path). */
    private OnePagePair startWith(String doorbells) throws Exception {
        boolean bells = doorbells.equals("bells");
        Path directory = bells ? rings : Files.createDirectories(rings.resolve("a-directory-whose-name-is-long-enough-that-a-socket-path-in-it-cannot-be-made"));
        start(2, c -> c.verbs().ringDirectory(directory).ringSleepLimitNs(doorbellsAlone ? TimeUnit.HOURS.toNanos(1) : c.verbs().ringSleepLimitNs()));
        OnePagePair pair = onePagePair();
        // A bell's socket file goes once its application connected; without bells none was made.
        awaitTrue(() -> {
            try {
                return bellFiles(directory).isEmpty();
            } catch (IOException e) {
                return false;
            }
        }, 10_000, "every application connected to its bell");
        return pair;
    }

    @Test
    void withRingsOffTheStreamCarriesEverything() throws Exception {
        start(2, c -> c.verbs().ringDirectory(null));
        OnePagePair pair = onePagePair();
        pair.a().store(pair.src(), new byte[] {42});
        QueuePair qp = pair.a().connect(pair.b());
        qp.await(qp.write(pair.local(), pair.src(), 1, pair.dst(), pair.remote().rkey()));
        assertThat(pair.b().load(pair.dst(), 1)).containsExactly(42);
        assertThat(ringFiles()).isEmpty();
        assertThat(sessionsOnRings(1)).isZero();
        qp.close();
    }

    /** The node's gauge of open sessions whose application attached rings. */
    private double sessionsOnRings(int node) {
        return ClusterChecks.total(connect(cluster.node(node)), "pagewire_sessions_rings");
    }

    /** An endpoint on each of the two nodes, with one registered PINNED page each. */
    private record OnePagePair(Endpoint a, Endpoint b, long src, long dst, MemoryRegion local, MemoryRegion remote) {
    }

    private OnePagePair onePagePair() {
        Endpoint a = connect(cluster.node(1)).openEndpoint("a");
        Endpoint b = connect(cluster.node(2)).openEndpoint("b");
        long src = a.allocate(4096);
        long dst = b.allocate(4096);
        return new OnePagePair(a, b, src, dst, a.register(src, 4096, RegistrationMode.PINNED, Access.all()),
                b.register(dst, 4096, RegistrationMode.PINNED, Access.all()));
    }
}
