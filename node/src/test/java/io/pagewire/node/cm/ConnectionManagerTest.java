package io.pagewire.node.cm;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.proto.fabric.CmMessage;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Two nodes' connection managers over a wire that can lose messages: the exchanges rdma_cm programs
 * rely on (connect, accept, disconnect on both sides, REJECTED with its reason, ADDR_ERROR and
 * UNREACHABLE in their time, requests sent again over loss, a listen or a channel that goes away).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class ConnectionManagerTest {
    private static final String CALLER = "local user test";

    private final ScheduledExecutorService timers = Executors.newSingleThreadScheduledExecutor();
    private final ExecutorService delivery = Executors.newSingleThreadExecutor();
    private final Map<String, ConnectionManager> nodes = new ConcurrentHashMap<>();
    /** Messages the wire drops while this says so. */
    private volatile Predicate<CmMessage> lose = m -> false;
    private final AtomicInteger lost = new AtomicInteger();
    private ConnectionManager one;
    private ConnectionManager two;

    @BeforeEach
    void start() throws Exception {
        one = manager("node-1", "127.0.1.1", CmTimers.on(timers));
        two = manager("node-2", "127.0.1.2", CmTimers.on(timers));
    }

    /** Both managers again, their timeouts on a clock the test moves. */
    private ManualCmTimers handDrivenClock() throws Exception {
        one.close();
        two.close();
        ManualCmTimers clock = new ManualCmTimers();
        one = manager("node-1", "127.0.1.1", clock);
        two = manager("node-2", "127.0.1.2", clock);
        return clock;
    }

    @AfterEach
    void stop() {
        one.close();
        two.close();
        delivery.shutdownNow();
        timers.shutdownNow();
    }

    private ConnectionManager manager(String id, String address, CmTimers cmTimers) throws Exception {
        AtomicInteger keys = new AtomicInteger(100);
        ConnectionManager m = new ConnectionManager(id, id.hashCode() & 0x7FFF, InetAddress.getByName(address), new CmWire() {
            @Override
            public void send(String node, CmMessage message) {
                if (lose.test(message)) {
                    lost.incrementAndGet();
                    return;
                }
                delivery.execute(() -> {
                    ConnectionManager to = nodes.get(node);
                    if (to != null) {
                        to.received(id, message.toByteArray());
                    }
                });
            }

            @Override
            public Collection<String> peers() {
                return nodes.keySet().stream().filter(n -> !n.equals(id)).toList();
            }
        }, cmTimers, new CmTimings(100, 3, 50), () -> (long) keys.incrementAndGet());
        nodes.put(id, m);
        return m;
    }

    /** A program's event channel: its events in a queue. */
    private static final class Program {
        final ConnectionManager cm;
        final CmChannel channel;
        final LinkedBlockingQueue<CmEvents.Event> events = new LinkedBlockingQueue<>();

        Program(ConnectionManager cm) {
            this.cm = cm;
            this.channel = cm.openChannel(CALLER, new CmChannel.Sink() {
                @Override
                public void event(CmEvents.Event event) {
                    events.add(event);
                }

                @Override
                public void close() {
                }
            });
        }

        int create() {
            return cm.create(channel.id(), channel.key(), CALLER, CmEvents.PS_TCP, CmEvents.QPT_RC).id();
        }

        CmEvents.Event next(int type) throws InterruptedException {
            CmEvents.Event e = events.poll(10, TimeUnit.SECONDS);
            assertThat(e).as("an event of type " + type).isNotNull();
            assertThat(e.type()).as("event type (status " + e.status() + ")").isEqualTo(type);
            return e;
        }
    }

    private static CmEvents.Params params(int qpn, int psn, String data) {
        return new CmEvents.Params(data.getBytes(), 1, 1, 7, 7, false, false, qpn, psn, 0);
    }

    private int listen(Program server, int port) {
        int id = server.create();
        server.cm.bind(server.channel.id(), server.channel.key(), CALLER, id, new byte[] {127, 0, 1, 2}, port);
        server.cm.listen(server.channel.id(), server.channel.key(), CALLER, id, 8);
        return id;
    }

    /** Resolves and sends the REQ; returns the client's id. */
    private int connect(Program client, int port, String data) throws InterruptedException {
        int id = client.create();
        client.cm.resolveAddress(client.channel.id(), client.channel.key(), CALLER, id, new byte[0], new byte[] {127, 0, 1, 2}, port, 1000);
        assertThat(client.next(CmEvents.ADDR_RESOLVED).status()).isZero();
        client.cm.resolveRoute(client.channel.id(), client.channel.key(), CALLER, id);
        client.next(CmEvents.ROUTE_RESOLVED);
        client.cm.connect(client.channel.id(), client.channel.key(), CALLER, id, params(11, 0x1234, data));
        return id;
    }

    /** A connection from the client's id to the server's port, established on both sides; the server's CONNECT_REQUEST. */
    private CmEvents.Event established(Program server, Program client, int port) throws InterruptedException {
        listen(server, port);
        int active = connect(client, port, "");
        CmEvents.Event request = server.next(CmEvents.CONNECT_REQUEST);
        two.accept(server.channel.id(), server.channel.key(), CALLER, request.id(), params(22, 1, ""));
        client.next(CmEvents.CONNECT_RESPONSE);
        one.establish(client.channel.id(), client.channel.key(), CALLER, active);
        server.next(CmEvents.ESTABLISHED);
        return request;
    }

    @Test
    void aConnectionIsMadeWithBothSidesParametersAndTornDownOnBoth() throws Exception {
        Program server = new Program(two);
        Program client = new Program(one);
        int listen = listen(server, 7471);
        int active = connect(client, 7471, "hello");

        CmEvents.Event request = server.next(CmEvents.CONNECT_REQUEST);
        assertThat(request.listenId()).isEqualTo(listen);
        assertThat(new String(request.remote().privateData())).isEqualTo("hello");
        assertThat(request.remote().qpn()).isEqualTo(11);
        assertThat(request.remote().psn()).isEqualTo(0x1234);
        assertThat(request.peerNode()).isEqualTo("node-1");
        assertThat(request.dstPort()).as("the requester's port").isBetween(32768, 60999);
        two.accept(server.channel.id(), server.channel.key(), CALLER, request.id(), params(22, 0x5678, "welcome"));

        CmEvents.Event response = client.next(CmEvents.CONNECT_RESPONSE);
        assertThat(response.remote().qpn()).isEqualTo(22);
        assertThat(response.remote().psn()).isEqualTo(0x5678);
        assertThat(new String(response.remote().privateData())).isEqualTo("welcome");
        assertThat(response.peerNode()).isEqualTo("node-2");
        one.establish(client.channel.id(), client.channel.key(), CALLER, active);
        server.next(CmEvents.ESTABLISHED);

        one.disconnect(client.channel.id(), client.channel.key(), CALLER, active);
        server.next(CmEvents.DISCONNECTED);
        client.next(CmEvents.DISCONNECTED);
        two.disconnect(server.channel.id(), server.channel.key(), CALLER, request.id()); // after the peer's: nothing more to do
        client.next(CmEvents.TIMEWAIT_EXIT);
        server.next(CmEvents.TIMEWAIT_EXIT);
        assertThat(one.counters().established() + two.counters().established()).isEqualTo(2);
    }

    @Test
    void aPortNobodyListensOnIsRejectedWithInvalidServiceId() throws Exception {
        Program client = new Program(one);
        connect(client, 9999, "");
        CmEvents.Event rejected = client.next(CmEvents.REJECTED);
        assertThat(rejected.status()).isEqualTo(CmEvents.REJECT_INVALID_SERVICE_ID);
    }

    @Test
    void aProgramsRejectCarriesItsPrivateData() throws Exception {
        Program server = new Program(two);
        Program client = new Program(one);
        listen(server, 7000);
        connect(client, 7000, "");
        CmEvents.Event request = server.next(CmEvents.CONNECT_REQUEST);
        two.reject(server.channel.id(), server.channel.key(), CALLER, request.id(), "busy".getBytes());
        CmEvents.Event rejected = client.next(CmEvents.REJECTED);
        assertThat(rejected.status()).isEqualTo(CmEvents.REJECT_CONSUMER_DEFINED);
        assertThat(new String(rejected.remote().privateData())).isEqualTo("busy");
    }

    @Test
    void anAddressNoNodeOwnsIsAnAddressErrorAfterTheTimeout() throws Exception {
        ManualCmTimers clock = handDrivenClock();
        Program client = new Program(one);
        int id = client.create();
        one.resolveAddress(client.channel.id(), client.channel.key(), CALLER, id, new byte[0], new byte[] {127, 0, 1, 9}, 1, 300);
        clock.advance(299);
        assertThat(client.events).as("no event before the timeout").isEmpty();
        clock.advance(1);
        CmEvents.Event error = client.next(CmEvents.ADDR_ERROR);
        assertThat(error.status()).isEqualTo(-CmEvents.ETIMEDOUT);
    }

    @Test
    void requestsLostOnTheWireAreSentAgain() throws Exception {
        Program server = new Program(two);
        Program client = new Program(one);
        listen(server, 7001);
        AtomicInteger reqs = new AtomicInteger();
        AtomicInteger reps = new AtomicInteger();
        lose = m -> (m.getKind() == CmMessage.Kind.REQ && reqs.incrementAndGet() <= 2) || (m.getKind() == CmMessage.Kind.REP && reps.incrementAndGet() <= 1);
        int active = connect(client, 7001, "");
        CmEvents.Event request = server.next(CmEvents.CONNECT_REQUEST);
        two.accept(server.channel.id(), server.channel.key(), CALLER, request.id(), params(22, 1, ""));
        client.next(CmEvents.CONNECT_RESPONSE);
        one.establish(client.channel.id(), client.channel.key(), CALLER, active);
        server.next(CmEvents.ESTABLISHED);
        assertThat(server.events).as("one request, once, though it was sent three times").isEmpty();
        assertThat(one.counters().resent() + two.counters().resent()).isGreaterThanOrEqualTo(3);
        assertThat(lost.get()).isEqualTo(3);
    }

    @Test
    void aPeerThatNeverAnswersIsUnreachableOnceTheRetriesRunOut() throws Exception {
        ManualCmTimers clock = handDrivenClock();
        Program server = new Program(two);
        Program client = new Program(one);
        listen(server, 7002);
        lose = m -> m.getKind() == CmMessage.Kind.REQ;
        connect(client, 7002, "");
        for (int resend = 1; resend <= 3; resend++) {
            clock.advance(100);
            assertThat(lost.get()).as("the REQ and " + resend + " sent again, 100 ms apart").isEqualTo(1 + resend);
            assertThat(client.events).as("no event while retries are left").isEmpty();
        }
        clock.advance(99);
        assertThat(client.events).isEmpty();
        clock.advance(1);
        CmEvents.Event unreachable = client.next(CmEvents.UNREACHABLE);
        assertThat(unreachable.status()).isEqualTo(-CmEvents.ETIMEDOUT);
        assertThat(lost.get()).isEqualTo(4);
    }

    @Test
    void aChannelWhoseStreamIsStuckHoldsUpNoOtherChannel() throws Exception {
        CountDownLatch stuck = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        List<CmEvents.Event> slowEvents = new CopyOnWriteArrayList<>();
        CmChannel slow = one.openChannel(CALLER, new CmChannel.Sink() {
            @Override
            public void event(CmEvents.Event event) {
                stuck.countDown();
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                slowEvents.add(event);
            }

            @Override
            public void close() {
            }
        });
        int slowId = one.create(slow.id(), slow.key(), CALLER, CmEvents.PS_TCP, CmEvents.QPT_RC).id();
        // The node's own address resolves at once: the event goes to the stuck stream on this caller's thread.
        Thread caller = new Thread(() -> one.resolveAddress(slow.id(), slow.key(), CALLER, slowId, new byte[0], new byte[] {127, 0, 1, 1}, 1, 1000));
        caller.start();
        assertThat(stuck.await(10, TimeUnit.SECONDS)).as("the stuck stream took its event").isTrue();

        Program server = new Program(two);
        Program client = new Program(one);
        established(server, client, 7010);
        assertThat(slowEvents).as("still stuck while the other ids connected").isEmpty();

        release.countDown();
        caller.join(TimeUnit.SECONDS.toMillis(10));
        assertThat(caller.isAlive()).isFalse();
        assertThat(slowEvents).extracting(CmEvents.Event::type).containsExactly(CmEvents.ADDR_RESOLVED);
    }

    @Test
    void aListenDestroyedWithRequestsPendingRejectsThem() throws Exception {
        Program server = new Program(two);
        Program client = new Program(one);
        int listen = listen(server, 7003);
        connect(client, 7003, "");
        server.next(CmEvents.CONNECT_REQUEST);
        two.destroy(server.channel.id(), server.channel.key(), CALLER, listen);
        client.next(CmEvents.REJECTED);
        assertThat(two.idCount()).as("the listen and its pending request are gone").isZero();
        // The port is free again.
        listen(server, 7003);
    }

    @Test
    void aProgramThatGoesAwayDisconnectsItsPeersAndLeavesNothing() throws Exception {
        Program server = new Program(two);
        Program client = new Program(one);
        CmEvents.Event request = established(server, client, 7004);

        one.closeChannel(client.channel.id());
        server.next(CmEvents.DISCONNECTED);
        assertThat(one.idCount()).isZero();
        assertThat(one.channelCount()).isZero();
    }

    @Test
    void aPeerNodeThatRestartedDisconnectsItsConnections() throws Exception {
        Program server = new Program(two);
        Program client = new Program(one);
        CmEvents.Event request = established(server, client, 7007);

        two.peerRestarted("node-1");
        assertThat(server.next(CmEvents.DISCONNECTED).id()).isEqualTo(request.id());
        server.next(CmEvents.TIMEWAIT_EXIT);
        assertThat(client.events).as("node-1's own ids are its programs' business").isEmpty();
    }

    @Test
    void bindingChecksThePortAndTheAddress() {
        Program server = new Program(two);
        listen(server, 7005);
        int second = server.create();
        assertThatThrownBy(() -> two.bind(server.channel.id(), server.channel.key(), CALLER, second, new byte[] {0, 0, 0, 0}, 7005))
                .isInstanceOf(CmException.class).extracting(e -> ((CmException) e).code()).isEqualTo(CmException.Code.ADDRESS_IN_USE);
        assertThatThrownBy(() -> two.bind(server.channel.id(), server.channel.key(), CALLER, second, new byte[] {127, 0, 1, 1}, 7006))
                .isInstanceOf(CmException.class).extracting(e -> ((CmException) e).code())
                .isEqualTo(CmException.Code.ADDRESS_NOT_AVAILABLE);
        assertThatThrownBy(() -> two.bind(server.channel.id(), server.channel.key() + 1, CALLER, second, new byte[0], 7006))
                .as("another channel's key").isInstanceOf(CmException.class);
        assertThatThrownBy(() -> two.bind(server.channel.id(), server.channel.key(), "someone else", second, new byte[0], 7006))
                .as("another caller").isInstanceOf(CmException.class);
        List<Integer> ports = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            int id = server.create();
            ports.add(two.bind(server.channel.id(), server.channel.key(), CALLER, id, new byte[0], 0).srcPort());
        }
        assertThat(ports).doesNotHaveDuplicates().allMatch(p -> p >= 32768 && p <= 60999);
    }

    @Test
    void malformedMessagesAreCountedAndDropped() {
        one.received("node-2", new byte[] {(byte) 0xFF, 1, 2, 3});
        assertThat(one.counters().malformed()).isEqualTo(1);
    }
}
