package io.pagewire.tools.perf;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** What running someone else's benchmark program takes: finding it on the PATH, a free port for its server, a clean environment. */
public final class ExternalPrograms {
    private ExternalPrograms() {
    }

    /** The executable {@code name} on the PATH, or null. */
    public static String onPath(String name) {
        String path = System.getenv("PATH");
        if (path != null) {
            for (String dir : path.split(File.pathSeparator)) {
                File candidate = new File(dir, name);
                if (candidate.canExecute()) {
                    return candidate.getPath();
                }
            }
        }
        return null;
    }

    /** A port free now on this host, or {@code fallback}. */
    public static int freePort(int fallback) {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        } catch (IOException e) {
            return fallback;
        }
    }

    /**
     * {@code command} behind {@code launch} (nice, the verbs library's launcher), its output and errors in one
     * stream, with this run's {@code environment} and none of the PAGEWIRE_, UCX_ or LD_PRELOAD variables this
     * shell has: what runs is what the run says.
     */
    static ProcessBuilder builder(List<String> launch, List<String> command, Map<String, String> environment) {
        List<String> line = new ArrayList<>(launch);
        line.addAll(command);
        ProcessBuilder b = new ProcessBuilder(line).redirectErrorStream(true);
        b.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_") || name.startsWith("UCX_") || name.equals("LD_PRELOAD"));
        b.environment().putAll(environment);
        return b;
    }
}
