package io.pagewire.tools.perf;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * How long the threads of some processes ran and waited on the run queue, from the kernel's schedstat
 * ({@code /proc/PID/task/TID/schedstat}: time on a core, time runnable but waiting for one), summed over
 * every thread of them. A snapshot taken before and one after a run give what the run cost the nodes'
 * threads in waits for a core, which is what a spinning program on the same cores makes them pay. Threads
 * are told apart by id, not name: a JVM names only its own threads for the kernel.
 */
public final class RunQueueWait {
    /** One thread's (or a sum's) times in nanoseconds: on a core, and runnable but waiting for one. */
    public record Times(long runNs, long waitNs) {
        Times minus(Times earlier) {
            return new Times(runNs - earlier.runNs, waitNs - earlier.waitNs);
        }
    }

    private final Map<String, Times> byThread;

    private RunQueueWait(Map<String, Times> byThread) {
        this.byThread = byThread;
    }

    /** Whether this kernel keeps schedstat (Linux with CONFIG_SCHEDSTATS). */
    public static boolean available() {
        return Files.isReadable(Path.of("/proc/self/schedstat"));
    }

    /** The processes' threads' times now, by "PID/TID"; threads that end meanwhile are simply missing from it. */
    public static RunQueueWait snapshot(List<Long> pids) {
        Map<String, Times> threadTimes = new TreeMap<>();
        for (long pid : pids) {
            Path tasks = Path.of("/proc", String.valueOf(pid), "task");
            List<Path> threads;
            try (Stream<Path> listed = Files.list(tasks)) {
                threads = listed.toList();
            } catch (IOException e) {
                continue; // the process ended
            }
            for (Path thread : threads) {
                try {
                    String[] fields = Files.readString(thread.resolve("schedstat")).strip().split("\\s+");
                    Times t = new Times(Long.parseLong(fields[0]), Long.parseLong(fields[1]));
                    threadTimes.put(pid + "/" + thread.getFileName(), t);
                } catch (IOException | RuntimeException e) {
                    // The thread ended between the listing and the read.
                }
            }
        }
        return new RunQueueWait(threadTimes);
    }

    /** What the threads spent since {@code earlier}, by thread ("PID/TID"; those that ran at all, threads that ended meanwhile left out). */
    public RunQueueWait since(RunQueueWait earlier) {
        Map<String, Times> delta = new TreeMap<>();
        byThread.forEach((thread, now) -> {
            Times d = now.minus(earlier.byThread.getOrDefault(thread, new Times(0, 0)));
            if (d.runNs > 0 || d.waitNs > 0) {
                delta.put(thread, d);
            }
        });
        return new RunQueueWait(delta);
    }

    /** Every thread together. */
    public Times total() {
        long run = 0;
        long wait = 0;
        for (Times t : byThread.values()) {
            run += t.runNs;
            wait += t.waitNs;
        }
        return new Times(run, wait);
    }

    public Map<String, Times> byThread() {
        return byThread;
    }

    /** One sentence: the waits and the time on a core per message of {@code messages}. */
    public String perMessage(long messages) {
        Times all = total();
        return String.format(Locale.ROOT, "%.1f us waiting for a core and %.1f us on one per message", all.waitNs / 1e3 / messages,
                all.runNs / 1e3 / messages);
    }
}
