package io.pagewire.tools.cli;

import io.pagewire.ring.OwnerDirectory;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.stream.Stream;

/**
 * The soak a person leaves running (hours, bounded by its duration): phase after phase of the chaos
 * soak (every mode, loss, duplication, reordering, link cuts, node restarts) with applications, verbs
 * programs and a node process of its own coming and going ({@link SoakChurn}), all in one ring
 * directory. After every phase: nothing acknowledged was lost and the nodes served to the end (the
 * phase's own checks), and nothing leaked: pins, frames and sessions back to zero (the phase's), no
 * file left in the ring directory, and this JVM's heap after GC, threads and file descriptors measured.
 * Its summary says what grew from the first phase to the last, if anything.
 */
final class LongSoak {
    /** Growth from the first phase to the last beyond these is reported: slack for the JIT, caches and pools. */
    private static final long HEAP_SLACK_BYTES = 48L << 20;
    private static final int THREAD_SLACK = 8;
    private static final int DESCRIPTOR_SLACK = 32;

    /** What the process and the ring directory held after a phase, once everything was closed. */
    record Sample(long heapAfterGcBytes, int threads, int fileDescriptors, int ownerDirectories, long ringDirectoryFiles) {
        String describe() {
            return String.format(Locale.ROOT, "heap after GC %.1f MiB, %d threads, %d file descriptors, %d owner directories and %d files"
                    + " left in the ring directory", heapAfterGcBytes / 1048576.0, threads, fileDescriptors, ownerDirectories, ringDirectoryFiles);
        }
    }

    /** One phase: the soak's result, what came and went, and what was held after it. */
    record Phase(int index, Soak.Result result, String churn, Sample after) {
    }

    /** The whole run. */
    record Result(List<Phase> phases, List<String> violations, List<String> grew, double seconds) {
        String summary(Soak.Settings settings) {
            long operations = phases.stream().mapToLong(p -> p.result().operations()).sum();
            long cuts = phases.stream().mapToLong(p -> p.result().linkCuts()).sum();
            long restarts = phases.stream().mapToLong(p -> p.result().restarts()).sum();
            long failed = phases.stream().mapToLong(p -> p.result().failedUnderFaults()).sum();
            String first = phases.isEmpty() ? "-" : phases.get(0).after().describe();
            String last = phases.isEmpty() ? "-" : phases.get(phases.size() - 1).after().describe();
            return String.format(Locale.ROOT, "soak --long: %d nodes, %.0f s in %d phases, seed %d: %,d operations, %d link cuts, %d node"
                    + " restarts, %,d operations failed under them; after the first phase: %s; after the last: %s; %s; invariant violations: %d",
                    settings.nodes(), seconds, phases.size(), settings.seed(), operations, cuts, restarts, failed, first, last,
                    grew.isEmpty() ? "nothing grew" : "GREW: " + String.join("; ", grew), violations.size());
        }
    }

    private final Soak.Settings settings;
    private final long phaseNs;
    private final Path library;
    private final PrintWriter log;

    /**
     * @param settings the whole run's: its duration is the run's, bounded; each phase lasts {@code phaseNs} (the last may be shorter)
     * @param library the verbs library its programs preload, or null for no programs
     */
    LongSoak(Soak.Settings settings, long phaseNs, Path library, PrintWriter log) {
        this.settings = settings;
        this.phaseNs = phaseNs;
        this.library = library;
        this.log = log;
    }

    Result run() throws Exception {
        long started = System.nanoTime();
        long end = started + settings.durationNs();
        Path shm = Path.of("/dev/shm");
        Path directory = Files.createTempDirectory(Files.isDirectory(shm) && Files.isWritable(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")),
                "pagewire-soak-");
        List<Phase> phases = new ArrayList<>();
        List<String> violations = new ArrayList<>();
        try {
            for (int index = 1; System.nanoTime() + phaseNs / 2 < end; index++) {
                long thisPhaseNs = Math.min(phaseNs, end - System.nanoTime());
                Soak.Settings phase = new Soak.Settings(settings.nodes(), thisPhaseNs, settings.seed() + index, settings.lossRate(),
                        settings.duplicateRate(), settings.reorderRate(), settings.delayNs(), settings.linkCuts(), settings.restarts(),
                        settings.maxOperations(), directory);
                SoakChurn churn = new SoakChurn(phase.seed(), directory, library);
                Soak.Result result = new Soak(phase, log, churn).run();
                Sample after = sample(directory);
                List<String> problems = new ArrayList<>(result.violations());
                if (after.ownerDirectories() > 0 || after.ringDirectoryFiles() > 0) {
                    problems.add("phase " + index + " left " + after.ownerDirectories() + " owner directories and " + after.ringDirectoryFiles()
                            + " files in " + directory + " once every node had stopped");
                }
                for (String v : problems) {
                    violations.add("phase " + index + ": " + v);
                }
                Phase done = new Phase(index, result, churn.describe(), after);
                phases.add(done);
                synchronized (log) {
                    log.printf(Locale.ROOT, "soak --long: phase %d: %s; %s; after it: %s%n", index, result.summary(phase), done.churn(),
                            after.describe());
                    log.flush();
                }
            }
        } finally {
            removeTree(directory);
        }
        return new Result(phases, violations, grew(phases), (System.nanoTime() - started) / 1e9);
    }

    /** What grew from the first phase to the last beyond its slack (nothing with one phase: the first includes the warm-up). */
    static List<String> grew(List<Phase> phases) {
        List<String> grew = new ArrayList<>();
        if (phases.size() < 2) {
            return grew;
        }
        Sample first = phases.get(0).after();
        Sample last = phases.get(phases.size() - 1).after();
        if (last.heapAfterGcBytes() - first.heapAfterGcBytes() > Math.max(HEAP_SLACK_BYTES, first.heapAfterGcBytes() / 4)) {
            grew.add(String.format(Locale.ROOT, "heap after GC %.1f -> %.1f MiB", first.heapAfterGcBytes() / 1048576.0,
                    last.heapAfterGcBytes() / 1048576.0));
        }
        if (last.threads() - first.threads() > THREAD_SLACK) {
            grew.add("threads " + first.threads() + " -> " + last.threads());
        }
        if (last.fileDescriptors() - first.fileDescriptors() > DESCRIPTOR_SLACK) {
            grew.add("file descriptors " + first.fileDescriptors() + " -> " + last.fileDescriptors());
        }
        return grew;
    }

    /** What this process and the ring directory hold now, after a full GC. */
    static Sample sample(Path directory) throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(100);
        }
        long heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
        int threads = ManagementFactory.getThreadMXBean().getThreadCount();
        int descriptors = count(Path.of("/proc/self/fd"), false);
        int owners;
        try (Stream<Path> entries = Files.list(directory)) {
            owners = (int) entries.filter(p -> p.getFileName().toString().endsWith(OwnerDirectory.SUFFIX)).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new Sample(heap, threads, descriptors, owners, count(directory, true));
    }

    private static int count(Path directory, boolean deep) {
        if (!Files.isDirectory(directory)) {
            return -1;
        }
        try (Stream<Path> entries = deep ? Files.walk(directory) : Files.list(directory)) {
            return (int) entries.filter(p -> !p.equals(directory)).count();
        } catch (IOException | UncheckedIOException e) {
            return -1;
        }
    }

    private static void removeTree(Path directory) {
        try (Stream<Path> all = Files.walk(directory)) {
            for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        } catch (IOException | UncheckedIOException e) {
            // The next node to start there, or pagewire clean, removes what a dead owner left.
        }
    }
}
