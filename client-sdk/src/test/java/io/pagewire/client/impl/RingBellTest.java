package io.pagewire.client.impl;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A session's bell: both ends wake each other through it, and a broken or impossible bell says so (the stream takes over). */
@Timeout(30)
class RingBellTest {
    @TempDir
    Path directory;

    @Test
    void eachSideWakesTheOtherAndABrokenBellSaysSo() throws Exception {
        Path rings = directory.resolve("node-1-7.rings");
        ServerSocketChannel server = RingBell.listen(rings);
        assertThat(server).isNotNull();
        assertThat(RingBell.pathFor(rings)).exists();
        RingBell app = RingBell.connect(rings);
        assertThat(app).isNotNull();
        try (Selector nodeSide = Selector.open(); Selector appSide = Selector.open()) {
            SocketChannel accepted = null;
            for (int i = 0; i < 100 && accepted == null; i++) {
                accepted = server.accept();
                Thread.sleep(10);
            }
            assertThat(accepted).as("the node accepts its application").isNotNull();
            RingBell node = RingBell.accepted(accepted);
            server.close();
            RingBell.deleteFile(rings);
            assertThat(RingBell.pathFor(rings)).doesNotExist();

            node.channel().register(nodeSide, SelectionKey.OP_READ);
            app.channel().register(appSide, SelectionKey.OP_READ);
            assertThat(nodeSide.selectNow()).as("nothing rang yet").isZero();
            assertThat(app.ring()).isTrue();
            assertThat(app.ring()).isTrue();
            assertThat(nodeSide.select(5_000)).as("the application's ring wakes the node").isEqualTo(1);
            nodeSide.selectedKeys().clear();
            assertThat(node.drain()).isTrue();
            assertThat(nodeSide.selectNow()).as("both wakes were read").isZero();
            assertThat(node.ring()).isTrue();
            assertThat(appSide.select(5_000)).as("the node's ring wakes the application").isEqualTo(1);
            assertThat(app.drain()).isTrue();

            app.close();
            assertThat(node.drain()).as("the node sees its application go").isFalse();
            assertThat(node.ring()).as("a broken bell makes the caller use the stream").isFalse();
            node.close();
        }
    }

    @Test
    void noBellWhereASocketCannotBeMadeOrReached() throws Exception {
        Path deep = Files.createDirectories(directory.resolve("x".repeat(120)));
        assertThat(RingBell.listen(deep.resolve("node-1-1.rings"))).as("past the 108-byte socket path limit").isNull();
        assertThat(RingBell.connect(directory.resolve("nobody-listens.rings"))).isNull();
    }
}
