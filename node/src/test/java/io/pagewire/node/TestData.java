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
}
