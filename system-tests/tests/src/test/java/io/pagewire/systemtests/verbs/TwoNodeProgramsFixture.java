package io.pagewire.systemtests.verbs;

import io.pagewire.node.PagewireNode;
import java.io.IOException;
import java.net.ServerSocket;
import org.junit.jupiter.api.BeforeEach;

/**
 * Two embedded nodes for verbs programs through the library: the client's node-1 and the server's
 * node-2, with memory and swap enough for perftest's buffers; the library must have been built.
 */
abstract class TwoNodeProgramsFixture extends SdkFixture {
    protected PagewireNode client;
    protected PagewireNode server;

    @BeforeEach
    void twoNodes() {
        VerbsPrograms.requireLibrary();
        start(2, context -> context.kernel().physicalMemoryBytes(256L << 20).swapBytes(256L << 20));
        client = cluster.node(1);
        server = cluster.node(2);
    }

    /** A TCP port for a program pair's own exchange (perftest and the pingpongs listen on it). */
    protected static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }
}
