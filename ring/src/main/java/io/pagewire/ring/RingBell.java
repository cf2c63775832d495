package io.pagewire.ring;

import java.io.IOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The application's end of a session's doorbell: a Unix-domain socket beside the ring file, which the
 * node listens on with one of its event loops. Either side writes a byte to wake the other (the
 * application's ring agent sleeps in a selector on it, the node's loop reads it among its sockets); a
 * wake costs one small write and one read, where the fallback (a message on the session's gRPC
 * stream) passes through two event loops before it reaches the agent.
 */
public final class RingBell implements AutoCloseable {
    private final SocketChannel channel;
    /** Where the wakes are read (direct: the channel reads into it without a copy). */
    private final ByteBuffer scratch = ByteBuffer.allocateDirect(64);
    /** The one byte a ring writes, reused under its own lock (no allocation and no copy per wake). */
    private final ByteBuffer one = ByteBuffer.allocateDirect(1).put(0, (byte) 1);
    private volatile boolean broken;

    private RingBell(SocketChannel channel) {
        this.channel = channel;
    }

    /** Where the bell of a ring file is: beside it, named after it. */
    public static Path pathFor(Path rings) {
        return rings.resolveSibling(rings.getFileName() + ".bell");
    }

    /** The application's side: connects to the bell of a ring file, or returns null when there is none to reach. */
    public static RingBell connect(Path rings) {
        Path path = pathFor(rings);
        if (!Files.exists(path)) {
            return null;
        }
        try {
            SocketChannel channel = SocketChannel.open(StandardProtocolFamily.UNIX);
            try {
                channel.connect(UnixDomainSocketAddress.of(path));
                channel.configureBlocking(false);
                return new RingBell(channel);
            } catch (IOException | RuntimeException e) {
                channel.close();
                return null;
            }
        } catch (IOException | UnsupportedOperationException e) {
            return null;
        }
    }

    /** Deletes a bell's socket file (once its connection is made, or when the session ends). */
    public static void deleteFile(Path rings) {
        try {
            Files.deleteIfExists(pathFor(rings));
        } catch (IOException e) {
            // A leftover socket file is harmless; names are never reused.
        }
    }

    /**
     * Wakes the other side. A full socket buffer means wakes are already waiting, which is as good.
     *
     * @return false when the bell is broken (the other side went away): use the stream's doorbell
     */
    public boolean ring() {
        if (broken) {
            return false;
        }
        try {
            synchronized (one) {
                one.clear();
                channel.write(one);
            }
            return true;
        } catch (IOException e) {
            broken = true;
            return false;
        }
    }

    /** Reads the wakes waiting; false when the other side closed the bell. Called by the one thread that waits on it. */
    public boolean drain() {
        try {
            int n;
            do {
                scratch.clear();
                n = channel.read(scratch);
            } while (n > 0);
            if (n < 0) {
                broken = true;
                return false;
            }
            return true;
        } catch (IOException e) {
            broken = true;
            return false;
        }
    }

    /** The connection, for a selector to wait on (registered for OP_READ). */
    public SocketChannel channel() {
        return channel;
    }

    @Override
    public void close() {
        broken = true;
        try {
            channel.close();
        } catch (IOException e) {
            // Closing a socket that failed already.
        }
    }
}
