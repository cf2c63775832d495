package io.pagewire.ring;

import static org.assertj.core.api.Assertions.assertThat;

import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The application's end of a session's bell: it wakes the node and is woken by it, and a bell whose
 * node went away says so (the stream takes over). The node's end is played here by a plain socket.
 */
@Timeout(30)
class RingBellTest {
    @TempDir
    Path directory;

    @Test
    void eachSideWakesTheOtherAndABrokenBellSaysSo() throws Exception {
        Path rings = directory.resolve("node-1-7.rings");
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            server.bind(UnixDomainSocketAddress.of(RingBell.pathFor(rings)));
            RingBell app = RingBell.connect(rings);
            assertThat(app).isNotNull();
            try (SocketChannel node = server.accept(); Selector appSide = Selector.open()) {
                RingBell.deleteFile(rings);
                assertThat(RingBell.pathFor(rings)).doesNotExist();

                assertThat(app.ring()).isTrue();
                assertThat(app.ring()).isTrue();
                ByteBuffer read = ByteBuffer.allocate(8);
                while (read.position() < 2) {
                    assertThat(node.read(read)).as("the application's rings reach the node").isPositive();
                }

                app.channel().register(appSide, SelectionKey.OP_READ);
                assertThat(appSide.selectNow()).as("nothing rang yet").isZero();
                node.write(ByteBuffer.wrap(new byte[] {1}));
                assertThat(appSide.select(5_000)).as("the node's ring wakes the application").isEqualTo(1);
                appSide.selectedKeys().clear();
                assertThat(app.drain()).isTrue();
                assertThat(appSide.selectNow()).as("the wake was read").isZero();

                node.close();
                assertThat(appSide.select(5_000)).as("the node's going wakes the application too").isEqualTo(1);
                assertThat(app.drain()).as("the application sees its node go").isFalse();
                assertThat(app.ring()).as("a broken bell makes the caller use the stream").isFalse();
                app.close();
            }
        }
    }

    @Test
    void noBellWhereNobodyListens() {
        assertThat(RingBell.connect(directory.resolve("nobody-listens.rings"))).isNull();
    }
}
