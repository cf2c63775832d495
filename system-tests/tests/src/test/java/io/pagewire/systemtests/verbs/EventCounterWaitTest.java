package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.TestData;
import java.nio.file.Path;
import java.time.Duration;
import java.util.EnumSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Blocking on an event counter is a wait in the application's memory, as NetVM's blocking detection
 * is: the delivered change that reaches the target settles it, with no call to the node, over the
 * shared-memory rings and over the session stream alike.
 */
class EventCounterWaitTest extends SdkFixture {
    @TempDir
    Path rings;
    private boolean sharedMemory;

    @Override
    protected ConnectOptions connectOptions() {
        return super.connectOptions().withSharedMemory(sharedMemory);
    }

    /** A page on each of two nodes, a queue pair from the first to the second, and a counter on the second. */
    private record Notifier(Endpoint a, Endpoint b, MemoryRegion local, MemoryRegion remote, QueuePair qp, EventCounter counter) {
        CompletableFuture<Completion> notifyOnce() {
            return qp.writeWithNotify(local, local.address(), 8, remote.address(), remote.rkey(), counter.id());
        }
    }

    private Notifier notifier(boolean overRings) {
        sharedMemory = overRings;
        start(2, c -> c.verbs().ringDirectory(rings));
        Endpoint a = connect(cluster.node(1)).openEndpoint("a");
        Endpoint b = connect(cluster.node(2)).openEndpoint("b");
        MemoryRegion local = a.register(a.allocate(4096), 4096, RegistrationMode.PINNED, Access.all());
        MemoryRegion remote = b.register(b.allocate(4096), 4096, RegistrationMode.PINNED, Access.all());
        return new Notifier(a, b, local, remote, a.connect(b), b.createEventCounter(EnumSet.of(Access.REMOTE_WRITE)));
    }

    @ParameterizedTest(name = "shared-memory rings {0}")
    @ValueSource(booleans = {true, false})
    void aBlockedWaitIsSettledByTheDeliveredChangeWithNoCallToTheNode(boolean overRings) throws Exception {
        Notifier n = notifier(overRings);
        assertThat(n.counter().await(0, Duration.ofSeconds(5))).as("the first wait subscribes (and asks the node once)").isZero();
        assertThat(counterCalls("CreateEventCounter")).as("the node's meters count calls by method").isEqualTo(1);
        // The first wait may be settled by the counter's first report before its one ask reached the node: count from after that ask.
        TestData.awaitTrue(() -> counterCalls("ReadEventCounter") >= 1, 5_000, "the first wait's ask in the node's meters");
        double readsBefore = counterCalls("ReadEventCounter");
        double awaitsBefore = counterCalls("AwaitEventCounter");
        int notifications = 20;
        for (int i = 1; i <= notifications; i++) {
            long target = i;
            CompletableFuture<Long> woken = CompletableFuture.supplyAsync(() -> n.counter().await(target, Duration.ofSeconds(10)));
            n.qp().await(n.notifyOnce());
            assertThat(woken.get(15, TimeUnit.SECONDS)).as("the wait for notification " + i).isEqualTo(i);
        }
        assertThat(new double[] {counterCalls("ReadEventCounter") - readsBefore, counterCalls("AwaitEventCounter") - awaitsBefore})
                .as("ReadEventCounter and AwaitEventCounter calls to the node for " + notifications + " waits").containsExactly(0, 0);
        assertThat(n.counter().awaitAsync(notifications, Duration.ofSeconds(1)).get(5, TimeUnit.SECONDS))
                .as("a target already reached is answered at once").isEqualTo(notifications);
    }

    @ParameterizedTest(name = "shared-memory rings {0}")
    @ValueSource(booleans = {true, false})
    void aWaitThatTimesOutReturnsTheValueThen(boolean overRings) throws Exception {
        Notifier n = notifier(overRings);
        n.qp().await(n.notifyOnce());
        assertThat(n.counter().await(5, Duration.ofMillis(50))).as("a wait that times out is not an error").isEqualTo(1);
        assertThat(n.counter().await(1, Duration.ZERO)).as("a zero timeout still sees a value already reached").isEqualTo(1);
        CompletableFuture<Long> waiting = n.counter().awaitAsync(3, Duration.ofSeconds(10));
        n.qp().await(n.notifyOnce());
        assertThat(waiting).as("one short of the target").isNotDone();
        n.qp().await(n.notifyOnce());
        assertThat(waiting.get(10, TimeUnit.SECONDS)).isEqualTo(3);
    }

    @ParameterizedTest(name = "shared-memory rings {0}")
    @ValueSource(booleans = {true, false})
    void closingTheCounterOrTheEndpointFailsItsWaitsAtOnce(boolean overRings) throws Exception {
        Notifier n = notifier(overRings);
        CompletableFuture<Long> onCounter = n.counter().awaitAsync(1, Duration.ofMinutes(5));
        n.counter().close();
        assertThatThrownBy(() -> onCounter.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                .hasCauseInstanceOf(PagewireException.InvalidRequestException.class).hasMessageContaining("was closed while waited for");
        assertThatThrownBy(() -> n.counter().await(1, Duration.ofSeconds(1))).isInstanceOf(PagewireException.InvalidRequestException.class)
                .hasMessageContaining("is closed");

        EventCounter second = n.b().createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        EventCounter neverWaitedOn = n.b().createEventCounter(EnumSet.of(Access.REMOTE_WRITE));
        CompletableFuture<Long> onEndpoint = second.awaitAsync(1, Duration.ofMinutes(5));
        n.b().close();
        assertThatThrownBy(() -> onEndpoint.get(10, TimeUnit.SECONDS)).isInstanceOf(ExecutionException.class)
                .hasCauseInstanceOf(PagewireException.UnavailableException.class)
                .hasMessageContaining("the session ended before the event counter reached its target");
        assertThat(neverWaitedOn.awaitAsync(1, Duration.ofSeconds(1))).as("a wait begun after the endpoint closed fails through its future")
                .failsWithin(Duration.ofSeconds(5)).withThrowableOfType(ExecutionException.class)
                .withCauseInstanceOf(PagewireException.UnavailableException.class);
    }

    /** Calls of a verbs method node 2 has received, from its gRPC meters. */
    private double counterCalls(String method) {
        return cluster.node(2).registry().scrape().lines()
                .filter(l -> l.startsWith("grpc_server_requests_received_messages_total") && l.contains("method=\"" + method + "\""))
                .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))).sum();
    }
}
