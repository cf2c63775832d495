package io.pagewire.systemtests.verbs;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.systemtests.verbs.VerbsPrograms.Program;
import io.pagewire.systemtests.verbs.VerbsPrograms.Run;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * How a program is pointed at Pagewire: one library answers libibverbs and librdmacm, started the one way
 * docs/verbs.md shows ({@code pagewire run --node ... -- PROGRAM}); a program that would run rdma-core's
 * librdmacm over Pagewire's libibverbs is refused when it loads, with how to start it, instead of crashing
 * in it; and middleware that probes every interface of the host prints nothing on the program's stderr.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class StackLoadingTest extends TwoNodeProgramsFixture {
    private static final String SERVER_ADDRESS = "127.0.1.2";

    /** rping links librdmacm and libibverbs both: through the launcher alone, both are Pagewire's. */
    @Test
    void aProgramThatLinksBothLibrariesRunsThroughTheLauncher() throws Exception {
        String port = String.valueOf(freePort());
        Program s = VerbsPrograms.launch(server.target(), List.of(), "rping", "-s", "-v", "-a", SERVER_ADDRESS, "-p", port, "-C", "5");
        awaitTrue(() -> server.connectionManager().idCount() > 0, 10_000, "the server listens");
        Run c = VerbsPrograms.launch(client.target(), List.of(), "rping", "-c", "-v", "-a", SERVER_ADDRESS, "-p", port, "-C", "5").await(60);
        Run sr = s.await(30);
        c.succeeded();
        sr.succeeded();
        assertThat(c.output().lines().filter(l -> l.startsWith("ping data: rdma-ping-"))).as(c.output()).hasSize(5);
    }

    /** rdma-core's librdmacm first in the search order, Pagewire's libibverbs behind it: refused at load, not left to crash. */
    @Test
    void rdmaCoresLibrdmacmAheadOfPagewiresIsRefusedAtLoad() throws Exception {
        Path real = realLibrary("librdmacm.so.1");
        Run run = VerbsPrograms.start(client.target(), List.of("LD_PRELOAD=" + real + " " + VerbsPrograms.LIBRARY), "rping", "-c", "-a",
                SERVER_ADDRESS, "-C", "1").await(30);
        assertThat(run.exitCode()).as(run.output()).isEqualTo(127);
        assertThat(run.output()).contains("comes from " + real, "pagewire run --node HOST:PORT -- PROGRAM ARGS").doesNotContain("Segmentation");
    }

    /** A directory of the library path holding only libibverbs.so.1: the program's librdmacm would be rdma-core's. */
    @Test
    void aLibraryPathWithOnlyLibibverbsIsRefusedAtLoad(@TempDir Path lib) throws Exception {
        Files.copy(VerbsPrograms.DIRECTORY.resolve("lib/libibverbs.so.1"), lib.resolve("libibverbs.so.1"));
        Run run = VerbsPrograms.start(client.target(), List.of("LD_PRELOAD=", "LD_LIBRARY_PATH=" + lib), "rping", "-c", "-a", SERVER_ADDRESS,
                "-C", "1").await(30);
        assertThat(run.exitCode()).as(run.output()).isEqualTo(127);
        assertThat(run.output()).contains("rdma-core's libibverbs and librdmacm do not run over Pagewire's", "librdmacm.so.1");
    }

    /**
     * libfabric's verbs provider binds every interface's address through rdma_cm to find its devices: the
     * binds to addresses no node owns fail as librdmacm's do (ENODEV, EADDRNOTAVAIL) without a line on
     * stderr, and the device is found at its node's address.
     */
    @Test
    void probingEveryInterfaceIsQuietAndFindsTheDevice() throws Exception {
        Run run = VerbsPrograms.launch(client.target(), List.of(), "fi_info", "-p", "verbs").await(60).succeeded();
        assertThat(run.output()).contains("domain: pagewire0", "provider: verbs").doesNotContain("pagewire-verbs");
    }

    private static Path realLibrary(String name) throws Exception {
        try (Stream<Path> dirs = Stream.of("/usr/lib", "/lib").map(Path::of).filter(Files::isDirectory)) {
            return dirs.flatMap(d -> {
                try {
                    return Files.list(d);
                } catch (Exception e) {
                    return Stream.empty();
                }
            }).map(d -> d.resolve(name)).filter(Files::isRegularFile).findFirst()
                    .orElseThrow(() -> new AssertionError("rdma-core's " + name + " (Debian's librdmacm1) is not installed"));
        }
    }
}
