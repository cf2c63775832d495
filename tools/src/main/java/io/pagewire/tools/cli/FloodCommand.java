package io.pagewire.tools.cli;

import io.pagewire.config.SettingType;
import io.pagewire.node.verbs.VerbsConfiguration;
import java.io.PrintWriter;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/** {@code pagewire flood}: what one abusive client costs another's latency and the node's heap, printed as ratios measured in one run. */
@Command(name = "flood", mixinStandardHelpOptions = true,
        description = {"Measures a victim's 64-byte write round trip alone and while another client floods the node (sessions to the",
            "limit, registrations, a stream it never reads; and bulk writes on the same link), alternating A B A B, with the heap",
            "after a collection per phase. Prints a table and the ratios to the victim alone."})
final class FloodCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = {"-n", "--pings"}, defaultValue = "2000", description = "Round trips per phase (default ${DEFAULT-VALUE}).")
    int pings;

    @Option(names = "--rounds", defaultValue = "2", description = "Rounds of alone / floods (default ${DEFAULT-VALUE}).")
    int rounds;

    @Option(names = "--control-rate",
            description = "The node's pagewire.quota.controlOpsPerSecond: control operations a caller may start per second, 0 for no"
                    + " pacing (default: the node's).")
    Double controlRate;

    @Option(names = "--send-rate", defaultValue = "0",
            description = "The nodes' pagewire.quota.sendBytesPerSecondPerSession: what one session's queue pairs may send per second"
                    + " together, as a size (100MiB), 0 for no allowance (default ${DEFAULT-VALUE}, the node's).")
    String sendRate;

    @Override
    public Integer call() throws Exception {
        double rate = controlRate == null ? VerbsConfiguration.CONTROL_OPS_PER_SECOND.defaultValue() : controlRate;
        if (pings < 10 || rounds < 1 || rate < 0) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(),
                    "--pings must be at least 10, --rounds at least 1 and --control-rate at least 0");
        }
        long sendBytesPerSecond;
        try {
            sendBytesPerSecond = SettingType.bytes("--send-rate", sendRate);
        } catch (IllegalArgumentException e) {
            throw new picocli.CommandLine.ParameterException(spec.commandLine(), e.getMessage());
        }
        PrintWriter out = spec.commandLine().getOut();
        out.print(Flood.report(new Flood(pings, rounds, rate, sendBytesPerSecond).run()));
        out.flush();
        return 0;
    }
}
