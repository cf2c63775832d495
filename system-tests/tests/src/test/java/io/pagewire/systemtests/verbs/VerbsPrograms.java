package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.PagewireNode;
import io.pagewire.node.TestData;
import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Runs unmodified verbs programs (rdma-core's examples, perftest, the library's own check) on Pagewire
 * nodes: each with the verbs library preloaded and {@code PAGEWIRE_NODE} naming its node, at the lowest
 * CPU priority so that a program that spins never starves the node threads that are its NIC.
 */
public final class VerbsPrograms {
    /** Where the build put the library (verbs-c/target). */
    static final Path DIRECTORY = Path.of(System.getProperty("pagewire.verbs.directory", "../../verbs-c/target")).toAbsolutePath().normalize();
    /** The one library a program preloads: libibverbs' and librdmacm's APIs both. */
    static final Path LIBRARY = DIRECTORY.resolve("libpagewire-verbs.so");
    /** The launcher that starts a program with it ({@code pagewire run}). */
    static final Path LAUNCHER = DIRECTORY.resolve("bin/pagewire-run");

    private VerbsPrograms() {
    }

    /** Skips (with the reason) when the library was not built, as on a machine without Debian's packages. */
    static void requireLibrary() {
        Assumptions.assumeTrue(Files.isRegularFile(LIBRARY), "the verbs library was not built at " + LIBRARY);
    }

    /**
     * For tests that run the tools' experiments and bench, which find the library themselves: skips as
     * {@link #requireLibrary} does, else points them at this build's library.
     */
    public static void useLibraryOfThisBuild() {
        requireLibrary();
        System.setProperty("pagewire.verbs.library", LIBRARY.toString());
    }

    /** A program's run: its exit code and everything it printed. */
    record Run(String command, int exitCode, String output) {
        Run succeeded() {
            assertThat(exitCode).as("%s exited with %d:%n%s", command, exitCode, output).isZero();
            return this;
        }
    }

    /** A started program. */
    static final class Program {
        final String command;
        final Process process;
        final File log;

        Program(String command, Process process, File log) {
            this.command = command;
            this.process = process;
            this.log = log;
        }

        Run await(long seconds) throws Exception {
            if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
                process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                return new Run(command, -1, "timed out after " + seconds + " s\n" + output());
            }
            return new Run(command, process.exitValue(), output());
        }

        String output() throws IOException {
            return Files.readString(log.toPath());
        }

        /** Waits until the program has printed {@code text} (a server saying it listens), failing after {@code seconds}. */
        void awaitOutput(String text, long seconds) throws InterruptedException {
            TestData.awaitTrue(() -> {
                try {
                    return output().contains(text);
                } catch (IOException e) {
                    return false;
                }
            }, seconds * 1000, command + " printing \"" + text + "\"");
        }

        void kill() throws InterruptedException {
            process.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        }
    }

    /** Starts {@code args} on {@code nodes} (comma-separated targets; the first is pagewire0). */
    static Program start(String nodes, String... args) throws IOException {
        return start(nodes, List.of(), args);
    }

    /** As {@link #start(String, String...)}, with extra environment entries NAME=VALUE. */
    static Program start(String nodes, List<String> environment, String... args) throws IOException {
        List<String> command = new ArrayList<>(List.of("nice", "-n", "19"));
        command.addAll(List.of(args));
        File log = File.createTempFile("pagewire-verbs-", ".log");
        log.deleteOnExit();
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log);
        builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_"));
        builder.environment().put("LD_PRELOAD", LIBRARY.toString());
        builder.environment().put("PAGEWIRE_NODE", nodes);
        for (String entry : environment) {
            int eq = entry.indexOf('=');
            builder.environment().put(entry.substring(0, eq), entry.substring(eq + 1));
        }
        return new Program(String.join(" ", args), builder.start(), log);
    }

    /**
     * Starts {@code args} the one way docs/verbs.md shows first: {@code pagewire run --node NODES -- PROGRAM ARGS}
     * (the launcher preloads the library itself), with extra environment entries NAME=VALUE.
     */
    static Program launch(String nodes, List<String> environment, String... args) throws IOException {
        List<String> command = new ArrayList<>(List.of("nice", "-n", "19", LAUNCHER.toString(), "--node", nodes, "--"));
        command.addAll(List.of(args));
        File log = File.createTempFile("pagewire-verbs-", ".log");
        log.deleteOnExit();
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log);
        builder.environment().keySet().removeIf(name -> name.startsWith("PAGEWIRE_") || name.equals("LD_PRELOAD"));
        for (String entry : environment) {
            int eq = entry.indexOf('=');
            builder.environment().put(entry.substring(0, eq), entry.substring(eq + 1));
        }
        return new Program(String.join(" ", args), builder.start(), log);
    }

    /** Waits until a process of this host listens on TCP {@code port} (as /proc/net/tcp and tcp6 list it). */
    static void awaitListening(int port, long timeoutMs) throws Exception {
        String local = String.format(":%04X ", port);
        io.pagewire.node.TestData.awaitTrue(() -> {
            for (String table : List.of("/proc/net/tcp", "/proc/net/tcp6")) {
                try {
                    // fields: sl local_address rem_address st ...; st 0A is LISTEN
                    if (Files.readAllLines(Path.of(table)).stream().map(String::trim).map(l -> l.split("\\s+"))
                            .anyMatch(f -> f.length > 3 && (f[1] + " ").endsWith(local) && f[3].equals("0A"))) {
                        return true;
                    }
                } catch (IOException e) {
                    // a table this kernel lacks
                }
            }
            return false;
        }, timeoutMs, "a process listens on TCP port " + port);
    }

    /** Runs one program to its end. */
    static Run run(String nodes, long seconds, String... args) throws Exception {
        return start(nodes, args).await(seconds);
    }

    /** Where a program reaches this node. */
    static String target(PagewireNode node) {
        return node.target();
    }
}
