package io.pagewire.systemtests;

import io.pagewire.client.Pagewire;
import java.util.Map;
import java.util.Random;
import java.util.function.BooleanSupplier;
import java.util.zip.CRC32;

/** What the cluster suites share: test data, checksums, waiting for a condition, and reading a node's meters through the SDK. */
final class ClusterChecks {
    private ClusterChecks() {
    }

    /** Bytes that differ with the seed, so a misplaced chunk shows as a wrong checksum. */
    static byte[] pattern(long seed, int length) {
        byte[] bytes = new byte[length];
        new Random(seed).nextBytes(bytes);
        return bytes;
    }

    static long crc(byte[] bytes) {
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return crc.getValue();
    }

    /** Polls {@code condition} every 10 ms; fails naming {@code what} after {@code timeoutMs}. */
    static void awaitTrue(BooleanSupplier condition, long timeoutMs, String what) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!condition.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("timed out after " + timeoutMs + " ms waiting until " + what);
            }
            Thread.sleep(10);
        }
    }

    /** A meter of the node summed over its tags (e.g. "pagewire_retransmitted_packets_total"), 0 when the node has none yet. */
    static double total(Pagewire node, String meter) {
        Map<String, Double> byTags = node.stats().get(meter);
        return byTags == null ? 0 : byTags.values().stream().mapToDouble(Double::doubleValue).sum();
    }

    /** One tagged value of a node's meter ("kind=drop"), 0 when absent. */
    static double value(Pagewire node, String meter, String tags) {
        Map<String, Double> byTags = node.stats().get(meter);
        return byTags == null ? 0 : byTags.getOrDefault(tags, 0.0);
    }
}
