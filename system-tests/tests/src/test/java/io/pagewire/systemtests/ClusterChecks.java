package io.pagewire.systemtests;

import io.pagewire.client.Pagewire;
import java.util.Arrays;
import java.util.List;
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

    /**
     * A meter of the node summed over the series whose tags include every one given ("mode=SHADOW",
     * "kind=major"); with no tags, over all of them. 0 when the node has no such series yet.
     */
    static double total(Pagewire node, String meter, String... tags) {
        Map<String, Double> byTags = node.stats().get(meter);
        if (byTags == null) {
            return 0;
        }
        double sum = 0;
        for (Map.Entry<String, Double> series : byTags.entrySet()) {
            List<String> have = Arrays.asList(series.getKey().split(","));
            if (have.containsAll(Arrays.asList(tags))) {
                sum += series.getValue();
            }
        }
        return sum;
    }
}
