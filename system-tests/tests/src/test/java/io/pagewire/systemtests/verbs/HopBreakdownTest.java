package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.tools.cli.PagewireCommand;
import io.pagewire.tools.perf.HopBreakdown;
import io.pagewire.tools.perf.HopRun;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The breakdown of one message (docs/benchmarks.md) from a real run: two node processes and an
 * ib_send_lat pair through the library, all four traced, every message followed from post to poll.
 */
@Timeout(value = 3, unit = TimeUnit.MINUTES)
class HopBreakdownTest {
    private static final int ITERATIONS = 3000;

    @BeforeAll
    static void theLibraryOfThisBuild() {
        VerbsPrograms.useLibraryOfThisBuild();
    }

    @Test
    void everyMessageOfAPingPongIsFollowedFromPostToPollThroughBothNodes(@TempDir Path out) throws Exception {
        StringWriter log = new StringWriter();
        HopRun.Found found = HopRun.run(PagewireCommand.class, Map.of("pagewire.kernel.physicalMemoryBytes", "256MiB"), out, 1000, ITERATIONS,
                new PrintWriter(log));
        assertThat(found).as(log.toString()).isNotNull();
        HopBreakdown.Result result = found.breakdown();
        String shown = found.markdown() + "\n" + log;
        System.out.println(shown);

        // Both directions, each sender's first tenth left out as warm-up; a message whose steps do not line up is unmatched.
        assertThat(result.matched() + result.unmatched()).as(shown).isEqualTo(2 * (ITERATIONS - ITERATIONS / 10));
        assertThat(result.matched()).as(shown).isGreaterThanOrEqualTo(result.unmatched() * 19);
        assertThat(result.hops()).as(shown).hasSize(HopBreakdown.SEND_HOPS);
        assertThat(result.hops()).as(shown).allSatisfy(hop -> assertThat(hop.medianUs()).isPositive());
        // The traces measure what the program measures: its own one-way figure, within the noise of two separate runs of clocks.
        assertThat(result.oneWayMedianUs()).as(shown).isBetween(found.programTypicalUs() / 3, found.programTypicalUs() * 3);
        try (var files = Files.list(out.resolve("hops"))) {
            assertThat(files.map(f -> f.getFileName().toString())).as(shown).contains("node-1.hops", "node-2.hops").hasSize(4);
        }
    }
}
