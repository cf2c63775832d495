package io.pagewire.tools.cli;

import io.pagewire.node.verbs.VerbsConfiguration;
import io.pagewire.ring.OwnerDirectory;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code pagewire clean}: removes what dead nodes left in a ring directory (their memory files, rings,
 * page tables and verbs sockets, and links that lead nowhere), never a live node's: a node holds a lock
 * on its directory there for as long as it runs, which the kernel releases when it dies.
 */
@Command(name = "clean", mixinStandardHelpOptions = true,
        description = {"Removes the files of dead nodes from a ring directory (a node's emulated memory lives there: in /dev/shm",
            "it is the host's RAM). A live node's files are never touched: each node locks its directory while it runs.",
            "Nodes do the same when they start. Exit status 1 when something could not be removed."})
final class CleanCommand implements Callable<Integer> {
    private final Map<String, String> environment;

    @Spec
    CommandSpec spec;

    @Option(names = "--ring-directory", paramLabel = "DIR",
            description = "The ring directory (default: PAGEWIRE_NODE_RING_DIRECTORY, else the nodes' default, /dev/shm where there is one).")
    Path directory;

    @Option(names = {"-n", "--dry-run"}, description = "Say what would be removed; remove nothing.")
    boolean dryRun;

    CleanCommand(Map<String, String> environment) {
        this.environment = environment;
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        Path dir = directory;
        if (dir == null) {
            String fromEnvironment = environment.get(VerbsConfiguration.RING_DIRECTORY.environmentName());
            dir = fromEnvironment != null && !fromEnvironment.isBlank() ? Path.of(fromEnvironment) : VerbsConfiguration.RING_DIRECTORY.defaultValue();
        }
        OwnerDirectory.Removal removal = OwnerDirectory.removeDead(dir, dryRun);
        for (Path owner : removal.owners()) {
            out.printf("%s%s%n", dryRun ? "would remove " : "removed ", owner);
        }
        for (Path link : removal.links()) {
            out.printf("%s%s%n", dryRun ? "would remove " : "removed ", link);
        }
        out.printf("%s: %s%s%n", dir, dryRun ? "(dry run) " : "", removal.describe());
        out.flush();
        return removal.failures().isEmpty() ? 0 : 1;
    }
}
