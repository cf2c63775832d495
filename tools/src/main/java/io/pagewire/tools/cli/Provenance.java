package io.pagewire.tools.cli;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/** Where a written result came from, as a page states it beside the figures: the checkout's commit and the machine it ran on. */
final class Provenance {
    private Provenance() {
    }

    /** The machine: cores, CPU model, operating system and Java. */
    static String machine() {
        String cpu = "unknown CPU";
        try {
            cpu = Files.readAllLines(Path.of("/proc/cpuinfo")).stream().filter(l -> l.startsWith("model name"))
                    .map(l -> l.substring(l.indexOf(':') + 1).trim()).findFirst().orElse(cpu);
        } catch (IOException | RuntimeException e) {
            // not Linux: the JVM's figures below still say enough
        }
        return String.format("%d cores (%s), %s %s, Java %s", Runtime.getRuntime().availableProcessors(), cpu,
                System.getProperty("os.name"), System.getProperty("os.arch"), System.getProperty("java.version"));
    }

    /**
     * The commit of the checkout the command runs in (12 digits), with "+ uncommitted changes" when a tracked
     * file that can change a result differs from it: documents (docs/, markdown) and the {@code written}
     * paths (the command's own outputs) do not; "no git checkout" where there is none.
     */
    static String commit(Path... written) {
        return commitOf(Path.of("").toAbsolutePath(), written);
    }

    /** As {@link #commit(Path...)}, for the checkout {@code directory} is in. */
    static String commitOf(Path directory, Path... written) {
        String head = git(directory, List.of("rev-parse", "--short=12", "HEAD"));
        String top = git(directory, List.of("rev-parse", "--show-toplevel"));
        if (head == null || top == null) {
            return "no git checkout";
        }
        List<String> status = new ArrayList<>(List.of("status", "--porcelain", "--untracked-files=no", "--", ":(top)", ":(top,exclude)docs",
                ":(top,exclude,glob)**/*.md"));
        Path root = Path.of(top);
        for (Path path : written) {
            Path absolute = path.toAbsolutePath().normalize();
            if (absolute.startsWith(root)) {
                status.add(":(top,exclude)" + root.relativize(absolute));
            }
        }
        String changes = git(directory, status);
        return changes == null || changes.isEmpty() ? head : head + " + uncommitted changes";
    }

    /** What {@code git ARGS} prints, trimmed, or null when it cannot run or fails. */
    private static String git(Path directory, List<String> args) {
        List<String> command = new ArrayList<>(List.of("git"));
        command.addAll(args);
        try {
            Process git = new ProcessBuilder(command).directory(directory.toFile()).redirectError(ProcessBuilder.Redirect.DISCARD).start();
            String output = new String(git.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            if (!git.waitFor(10, TimeUnit.SECONDS) || git.exitValue() != 0) {
                git.destroy();
                return null;
            }
            return output;
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }
}
