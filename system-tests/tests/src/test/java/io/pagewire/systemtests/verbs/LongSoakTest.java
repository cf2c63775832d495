package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.cli.PagewireCommand;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The short form of {@code pagewire soak --long} (what CI runs; a person runs it for hours): two
 * phases of 45 s of the chaos soak with applications, verbs programs through the library (one in three
 * killed with SIGKILL) and a node process killed with SIGKILL coming and going; after each phase
 * nothing acknowledged was lost and nothing was left (pins, frames, sessions, files in the ring
 * directory), and from the first phase to the second nothing grew (heap after GC, threads, file
 * descriptors).
 */
class LongSoakTest {
    @Test
    @Timeout(value = 8, unit = TimeUnit.MINUTES)
    void twoPhasesWithChurnLeaveNothingAndGrowNothing() {
        VerbsPrograms.requireLibrary();
        long seed = Long.getLong("pagewire.soak.seed", System.nanoTime());
        PrintStream oldOut = System.out;
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        int code;
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            code = PagewireCommand.run(Map.of(), "soak", "--long", "--duration", "90s", "--phase", "45s", "--seed", String.valueOf(seed),
                    "--verbs-library", VerbsPrograms.LIBRARY.toString());
        } finally {
            System.setOut(oldOut);
        }
        String printed = out.toString(StandardCharsets.UTF_8);
        System.out.println(printed);
        String summary = printed.lines().filter(l -> l.startsWith("soak --long: 3 nodes")).findFirst().orElse(printed);
        assertThat(code).as(summary).isZero();
        assertThat(summary).contains("in 2 phases", "nothing grew", "invariant violations: 0");
        assertThat(printed.lines().filter(l -> l.startsWith("soak --long: phase ")).toList()).as("phases").hasSize(2)
                .allSatisfy(line -> assertThat(line).contains("1 node process killed with SIGKILL", "verbs programs (",
                        "0 owner directories and 0 files left"));
    }
}
