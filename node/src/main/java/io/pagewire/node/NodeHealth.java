package io.pagewire.node;

import io.grpc.netty.shaded.io.netty.util.concurrent.EventExecutor;
import io.grpc.netty.shaded.io.netty.util.concurrent.ScheduledFuture;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * The node's health where a probe that starts no JVM can read it: a small file rewritten every interval,
 * {@code SERVING <node> <epoch ms>} while every event loop (where the lanes, sessions and rings are
 * served) has run within the last three intervals and the server takes calls, else {@code NOT_SERVING
 * <node> <epoch ms> <why>}. A node that stops being able to write it (stuck, stopped, killed) leaves a
 * file that grows old, which the probe ({@code deploy/docker/pagewire-health}) tells from a fresh one.
 */
final class NodeHealth implements AutoCloseable {
    private static final System.Logger LOG = System.getLogger(NodeHealth.class.getName());

    private final String nodeId;
    private final Path file;
    private final Path written;
    private final long intervalNs;
    private final Supplier<String> notServing;
    private final List<EventExecutor> loops = new ArrayList<>();
    private final long[] beats;
    private final List<ScheduledFuture<?>> beating = new ArrayList<>();
    private final java.util.concurrent.ScheduledFuture<?> writing;
    private volatile boolean closed;
    private String lastState = "";

    /**
     * @param loops the node's event loops, each of which beats on itself every interval
     * @param notServing why the node does not serve now (shutting down, say), or null while it does
     */
    NodeHealth(String nodeId, Path file, long intervalNs, Iterable<EventExecutor> loops, Supplier<String> notServing,
            ScheduledExecutorService scheduler) {
        this.nodeId = nodeId;
        this.file = file;
        this.written = file.resolveSibling(file.getFileName() + ".new");
        this.intervalNs = intervalNs;
        this.notServing = notServing;
        loops.forEach(this.loops::add);
        this.beats = new long[this.loops.size()];
        long now = System.nanoTime();
        for (int i = 0; i < beats.length; i++) {
            int loop = i;
            beats[i] = now;
            beating.add(this.loops.get(i).scheduleAtFixedRate(() -> beats[loop] = System.nanoTime(), 0, intervalNs, TimeUnit.NANOSECONDS));
        }
        this.writing = scheduler.scheduleAtFixedRate(this::write, 0, intervalNs, TimeUnit.NANOSECONDS);
    }

    /** Why the node is not healthy now, or null when it is. */
    String problem() {
        String why = notServing.get();
        if (why != null) {
            return why;
        }
        long now = System.nanoTime();
        for (int i = 0; i < beats.length; i++) {
            long silentNs = now - beats[i];
            if (silentNs > 3 * intervalNs) {
                return String.format(java.util.Locale.ROOT, "event loop %d of %d has not run for %.1f s", i + 1, beats.length, silentNs / 1e9);
            }
        }
        return null;
    }

    private synchronized void write() {
        if (closed) {
            return;
        }
        String problem = problem();
        write(problem == null ? "SERVING " + nodeId + " " + System.currentTimeMillis()
                : "NOT_SERVING " + nodeId + " " + System.currentTimeMillis() + " " + problem);
        String state = problem == null ? "SERVING" : "NOT_SERVING: " + problem;
        if (!state.equals(lastState) && !lastState.isEmpty()) {
            LOG.log(problem == null ? System.Logger.Level.INFO : System.Logger.Level.WARNING, "node " + nodeId + " health: " + state);
        }
        lastState = state;
    }

    /** Replaces the file whole, so a probe never reads half a line. */
    private void write(String line) {
        try {
            Files.writeString(written, line + "\n", StandardCharsets.UTF_8);
            try {
                Files.move(written, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(written, file, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException e) {
            if (lastState.isEmpty() || !lastState.startsWith("unwritable")) {
                LOG.log(System.Logger.Level.WARNING, "node " + nodeId + " cannot write its health file " + file + ": " + e.getMessage());
            }
            lastState = "unwritable";
        }
    }

    /** The node stops: the file says so at once. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        writing.cancel(false);
        beating.forEach(f -> f.cancel(false));
        write("NOT_SERVING " + nodeId + " " + System.currentTimeMillis() + " stopped");
    }
}
