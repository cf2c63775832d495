package io.pagewire.client.impl;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The application's ring agent when its node closes the bell: it keeps sleeping (no spin) and the stream wakes it. */
@Timeout(30)
class RingClientTest {
    @TempDir
    Path directory;

    @Test
    void anAgentWhoseBellTheNodeClosedSleepsAndIsWokenOnTheStream() throws Exception {
        String previous = System.getProperty(RingIdler.SLEEP_LIMIT_PROP_NAME);
        // Only a doorbell may wake the agent here: a lost one would hang the test until its timeout.
        System.setProperty(RingIdler.SLEEP_LIMIT_PROP_NAME, String.valueOf(TimeUnit.HOURS.toNanos(1)));
        Path path = directory.resolve("node-1-3.rings");
        SessionRings rings = SessionRings.create(path, 4096, 1);
        ConcurrentLinkedQueue<Long> counterValues = new ConcurrentLinkedQueue<>();
        AtomicInteger streamDoorbells = new AtomicInteger();
        String name = "pagewire-sdk-ring-test-" + System.nanoTime();
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(RingBell.pathFor(path)));
            RingBell bell = RingBell.connect(path);
            assertThat(bell).isNotNull();
            SocketChannel nodeEnd = server.accept();
            RingClient client = new RingClient(rings, new RingClient.Events() {
                @Override
                public void completed(long wrId, int qpn, int opcode, int status, long bytes, long value, String error, boolean hasImmediate,
                        int immediate) {
                }

                @Override
                public void refused(int qpn, long wrId, String error) {
                }

                @Override
                public void counterChanged(int counterId, long value) {
                    counterValues.add(value);
                }
            }, streamDoorbells::incrementAndGet, false, name, bell);
            try {
                Thread agent = Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals(name)).findFirst().orElseThrow();
                nodeEnd.close();
                Thread.sleep(300); // the agent sees the bell close and goes back to sleep

                ThreadMXBean threads = ManagementFactory.getThreadMXBean();
                long cpuBefore = threads.getThreadCpuTime(agent.getId());
                Thread.sleep(500);
                long cpuNs = threads.getThreadCpuTime(agent.getId()) - cpuBefore;
                // A spinning agent takes most of the 500 ms; a sleeping one next to nothing.
                assertThat(cpuNs).as("agent CPU in 500 ms after its bell closed, ns").isLessThan(100_000_000L);

                rings.nodeAsleep(true);
                client.post(1, List.of(), new long[0], System.nanoTime() + TimeUnit.SECONDS.toNanos(5));
                assertThat(streamDoorbells.get()).as("a post to a sleeping node rings on the stream once the bell is gone").isEqualTo(1);

                UnsafeBuffer record = new UnsafeBuffer(new byte[SessionRings.COUNTER_BYTES]);
                record.putInt(0, 7);
                record.putLong(8, 42);
                assertThat(rings.events().write(SessionRings.COUNTER, record, 0, SessionRings.COUNTER_BYTES)).isTrue();
                client.wake(); // what the stream's doorbell does
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (counterValues.isEmpty() && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                assertThat(counterValues).as("the stream's wake reached the sleeping agent").containsExactly(42L);
            } finally {
                client.close();
            }
        } finally {
            if (previous == null) {
                System.clearProperty(RingIdler.SLEEP_LIMIT_PROP_NAME);
            } else {
                System.setProperty(RingIdler.SLEEP_LIMIT_PROP_NAME, previous);
            }
        }
    }
}
