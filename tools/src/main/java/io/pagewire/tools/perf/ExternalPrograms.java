package io.pagewire.tools.perf;

import java.io.File;
import java.io.IOException;
import java.net.ServerSocket;

/** What running someone else's benchmark program takes: finding it on the PATH and a free port for its server. */
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
}
