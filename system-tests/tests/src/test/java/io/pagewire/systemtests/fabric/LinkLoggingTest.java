package io.pagewire.systemtests.fabric;

import io.pagewire.node.fabric.Fabric;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.node.Transport;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** An operator reading a node's log sees its links come up, and sees a peer go away. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class LinkLoggingTest {
    @Test
    void aNodeLogsItsLinksAndTheLossOfAPeer() throws Exception {
        List<LogRecord> records = new CopyOnWriteArrayList<>();
        Handler handler = new Handler() {
            @Override
            public void publish(LogRecord record) {
                records.add(record);
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        Logger logger = Logger.getLogger(Fabric.class.getPackageName()); // the fabric's classes log under its package
        logger.addHandler(handler);
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> { })) {
            awaitRecord(records, Level.INFO, "node node-1: linked to node-2");
            // Every lane up first: a lane whose hello is still on its way when the peer closes comes up
            // after the others went down, and is then lost a second time (a peer dying mid-handshake).
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            int all = 2 * cluster.node(1).context().fabric().lanesPerPeer();
            while (cluster.node(1).fabric().lanesUp("node-2") < all) {
                assertThat(System.nanoTime() < deadline).as("all %d lanes to node-2 up", all).isTrue();
                Thread.sleep(10);
            }
            cluster.node(2).close();
            awaitRecord(records, Level.WARNING, "node node-1: lost the link to node-2");
        } finally {
            logger.removeHandler(handler);
        }
        assertThat(records).filteredOn(r -> r.getMessage().contains("lost the link to node-2")).hasSize(1);
    }

    private static void awaitRecord(List<LogRecord> records, Level level, String text) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (records.stream().noneMatch(r -> r.getLevel() == level && r.getMessage().contains(text))) {
            assertThat(System.nanoTime() < deadline).as("a %s record containing '%s' in %s", level, text,
                    records.stream().map(LogRecord::getMessage).toList()).isTrue();
            Thread.sleep(20);
        }
    }
}
