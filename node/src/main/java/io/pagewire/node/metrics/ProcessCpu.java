package io.pagewire.node.metrics;

import java.lang.management.ManagementFactory;

/** The CPU time this JVM process has used, all threads together: the cost side of every benchmark figure. */
public final class ProcessCpu {
    private ProcessCpu() {
    }

    /** CPU nanoseconds used since the process started, or 0 where the JVM cannot tell. */
    public static long nanos() {
        java.lang.management.OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.OperatingSystemMXBean sun ? Math.max(0, sun.getProcessCpuTime()) : 0;
    }
}
