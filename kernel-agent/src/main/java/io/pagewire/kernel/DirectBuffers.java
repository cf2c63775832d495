package io.pagewire.kernel;

import java.lang.reflect.Field;
import java.nio.ByteBuffer;

/**
 * Releases a direct buffer's memory at once instead of when the GC finds it, so that a JVM that
 * starts and stops many nodes (tests, the demo) does not run out of direct memory. Uses
 * {@code sun.misc.Unsafe.invokeCleaner}, which needs no JVM flags; if it is unavailable the memory is
 * left to the GC.
 */
final class DirectBuffers {
    private static final sun.misc.Unsafe UNSAFE = unsafe();

    private DirectBuffers() {
    }

    /** Frees a direct buffer; nothing may use it (or any view of it) afterwards. */
    static void free(ByteBuffer buffer) {
        if (UNSAFE != null && buffer != null && buffer.isDirect()) {
            UNSAFE.invokeCleaner(buffer);
        }
    }

    private static sun.misc.Unsafe unsafe() {
        try {
            Field field = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
            field.setAccessible(true);
            return (sun.misc.Unsafe) field.get(null);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }
}
