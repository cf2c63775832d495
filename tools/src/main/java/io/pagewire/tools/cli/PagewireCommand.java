package io.pagewire.tools.cli;

import java.util.Map;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/** The {@code pagewire} command: run a node, the demo, the perftest, watch a node's counters, or make a testbed's certificates. */
@Command(name = "pagewire",
        mixinStandardHelpOptions = true,
        versionProvider = PagewireCommand.Version.class,
        description = "Pagewire: a testbed for user-level networking with virtual memory.",
        subcommands = {NodeCommand.class, DemoCommand.class, PerfCommand.class, BenchCommand.class, HopsCommand.class, StatCommand.class, HealthCommand.class,
            CertsCommand.class, CleanCommand.class, SoakCommand.class, FloodCommand.class, ExperimentCommand.class,
            CommandLine.HelpCommand.class})
public final class PagewireCommand {
    /**
     * Netty's (gRPC's shaded copy) leak detector: by default it tracks one transport buffer in 128 and
     * fills in a stack trace for each, on the lanes' event loops; on a 1 MiB write_bw sender that was
     * 2-3 % of the loop's time (perf record, Throwable.fillInStackTrace under
     * PooledByteBufAllocator.newDirectBuffer). The command turns it off unless the JVM was started with
     * a level; the test suites, which start nodes without this entry point, keep Netty's default so
     * that a leak still shows up there.
     */
    static final String NETTY_LEAK_DETECTION_PROPERTY = "io.grpc.netty.shaded.io.netty.leakDetection.level";

    public static void main(String[] args) {
        leaveNettyLeakDetectionOff();
        System.exit(run(System.getenv(), args));
    }

    /** Turns Netty's leak detector off unless a level was given (call before the first Netty class loads). */
    static void leaveNettyLeakDetectionOff() {
        if (System.getProperty(NETTY_LEAK_DETECTION_PROPERTY) == null) {
            System.setProperty(NETTY_LEAK_DETECTION_PROPERTY, "disabled");
        }
    }

    /** Runs the command line with a given environment; returns the exit code. */
    public static int run(Map<String, String> environment, String... args) {
        CommandLine commandLine = new CommandLine(new PagewireCommand(), new Factory(environment));
        commandLine.setExecutionExceptionHandler(PagewireCommand::refused);
        return commandLine.execute(args);
    }

    /**
     * What a command could not do because of what it was given or found (a missing library or program,
     * a directory it cannot write, a node's refusal) is one line naming the command, exit code 1; anything
     * else is a bug and keeps its stack trace.
     */
    private static int refused(Exception e, CommandLine command, CommandLine.ParseResult parsed) throws Exception {
        if (e instanceof IllegalStateException || e instanceof IllegalArgumentException || e instanceof java.io.IOException
                || e instanceof java.io.UncheckedIOException || e instanceof io.pagewire.client.PagewireException) {
            command.getErr().println("pagewire " + command.getCommandName() + ": " + e.getMessage());
            command.getErr().flush();
            return 1;
        }
        throw e;
    }

    /** Gives subcommands the environment they read settings from (tests pass their own). */
    private record Factory(Map<String, String> environment) implements CommandLine.IFactory {
        @Override
        public <K> K create(Class<K> type) throws Exception {
            if (type == NodeCommand.class) {
                return type.cast(new NodeCommand(environment));
            }
            if (type == CleanCommand.class) {
                return type.cast(new CleanCommand(environment));
            }
            return CommandLine.defaultFactory().create(type);
        }
    }

    /** The version from the jar's manifest. */
    static final class Version implements CommandLine.IVersionProvider {
        @Override
        public String[] getVersion() {
            String version = PagewireCommand.class.getPackage().getImplementationVersion();
            return new String[] {"pagewire " + (version == null ? "development build" : version)};
        }
    }
}
