package io.pagewire.node;

import java.util.Random;
import java.util.function.BooleanSupplier;
import java.util.zip.CRC32;

/**
 * What every cluster test needs, in the node's tests and (through the node's test jar) in the
 * system tests: seeded test data, checksums, and waiting for a condition with a deadline.
 */
public final class TestData {
    private TestData() {
    }

    /** Bytes that differ with the seed, so a misplaced chunk shows as a wrong checksum. */
    public static byte[] pattern(long seed, int length) {
        byte[] bytes = new byte[length];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }

    public static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    /** Polls {@code condition} every 10 ms; fails naming {@code what} after {@code timeoutMs}. */
    public static void awaitTrue(BooleanSupplier condition, long timeoutMs, String what) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out after " + timeoutMs + " ms waiting until " + what);
            }
            Thread.sleep(10);
        }
    }

    /**
     * A write of 3 pages and 17 bytes from an application on node {@code from} to one on node
     * {@code to}, through the SDK over the cluster's own security, lands byte for byte: what a test
     * checks to say a node still serves well-behaved applications after it was attacked.
     */
    public static void assertWriteLands(io.pagewire.node.EmbeddedCluster cluster, int from, int to, String when) throws Exception {
        try (io.pagewire.client.Pagewire a = io.pagewire.client.Pagewire.connect(cluster.node(from).target(), cluster.connectOptions());
                io.pagewire.client.Pagewire b = io.pagewire.client.Pagewire.connect(cluster.node(to).target(), cluster.connectOptions())) {
            io.pagewire.client.Endpoint sender = a.openEndpoint("well-behaved-sender");
            io.pagewire.client.Endpoint receiver = b.openEndpoint("well-behaved-receiver");
            int length = 3 * 4096 + 17;
            long src = sender.allocate(length);
            long dst = receiver.allocate(length);
            byte[] data = new byte[length];
            new Random(length).nextBytes(data);
            sender.store(src, data);
            var all = io.pagewire.client.Access.all();
            var source = sender.register(src, length, io.pagewire.client.RegistrationMode.PINNED, all);
            var target = receiver.register(dst, length, io.pagewire.client.RegistrationMode.ON_DEMAND, all);
            sender.connect(receiver).write(source, src, length, dst, target.rkey()).get(30, java.util.concurrent.TimeUnit.SECONDS);
            org.assertj.core.api.Assertions.assertThat(receiver.load(dst, length)).as(when).isEqualTo(data);
        }
    }
}
