package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.TestData;
import io.pagewire.systemtests.verbs.VerbsPrograms.Program;
import io.pagewire.systemtests.verbs.VerbsPrograms.Run;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The verbs library checked the way C libraries are checked, against two nodes: its own test programs
 * with the library and themselves built with AddressSanitizer and UndefinedBehaviorSanitizer (any
 * finding, a leak included, ends the program), valgrind's memcheck over an unmodified
 * ibv_rc_pingpong, and several threads posting and polling at once.
 */
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class CheckedVerbsLibraryTest extends TwoNodeProgramsFixture {
    private static final Path SANITIZED = VerbsPrograms.DIRECTORY.resolve("asan");
    private static final List<String> FINDINGS = List.of("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:");



    @Test
    void rcConformanceRunsCleanUnderTheSanitizers() throws Exception {
        Run run = sanitized(120, "pagewire-verbs-conformance");
        assertThat(run.output()).as(run.output()).doesNotContain("FAIL").contains("PASSED");
        run.succeeded();
    }

    @Test
    void theApisCornersRunCleanUnderTheSanitizers() throws Exception {
        Run run = sanitized(60, "pagewire-verbs-check");
        assertThat(run.output()).as(run.output()).doesNotContain("FAIL").contains("PASSED");
        run.succeeded();
        Run api = sanitized(60, "pagewire-verbs-check", "api");
        assertThat(api.output()).as(api.output()).doesNotContain("FAIL").contains("PASSED");
        api.succeeded();
    }

    /**
     * Random malloc sizes and alignments, every order of teardown, three threads with a context each, for
     * a bounded time; the seed is printed (and taken from -Dpagewire.verbs.seed to replay one).
     */
    @Test
    void registrationTeardownStressRunsCleanUnderTheSanitizers() throws Exception {
        long seed = Long.getLong("pagewire.verbs.seed", System.nanoTime() & 0xffffffffL);
        Run run = sanitized(90, "pagewire-verbs-teardown", "15", String.valueOf(seed), "3");
        assertThat(run.output()).as(run.output()).doesNotContain("FAIL").contains("seed " + seed, "ok teardown");
        run.succeeded();
    }

    @Test
    void threadsPostingAndPollingRunCleanUnderTheSanitizers() throws Exception {
        Run run = sanitized(120, "pagewire-verbs-threads", "4", "1000");
        assertThat(run.output()).as(run.output()).doesNotContain("FAIL").contains("ok threads");
        run.succeeded();
    }

    /** Threads on their own pairs and one shared send CQ, a SEND now and then, registrations churning: each completion once. */
    @Test
    void threadsPostingOnTheirOwnPairsAndPollingOneSharedCqSeeEachCompletionOnce() throws Exception {
        Run run = VerbsPrograms.run(client.target() + "," + server.target(), 120,
                VerbsPrograms.DIRECTORY.resolve("bin/pagewire-verbs-threads").toString(), "6", "3000");
        assertThat(run.output()).as(run.output()).doesNotContain("FAIL").contains("18000 WRITEs", "ok threads");
        run.succeeded();
    }

    /**
     * A thread storing into a malloc'd page while another registers and deregisters a neighbour on it:
     * no store is lost while the library moves the page's bytes. Writers are held back with userfaultfd's
     * write protection, or (the signal pager) by a read-only page whose faults the pager holds; where the
     * kernel has no userfaultfd write protection the library says so and that case does not apply.
     */
    @ParameterizedTest(name = "pager {0}")
    @ValueSource(strings = {"userfaultfd", "signal"})
    void storesToAPageBeingRegisteredOrDeregisteredAreNotLost(String pager) throws Exception {
        Run run = VerbsPrograms.start(client.target(), List.of("PAGEWIRE_VERBS_LOG=info", "PAGEWIRE_VERBS_PAGER=" + pager),
                VerbsPrograms.DIRECTORY.resolve("bin/pagewire-verbs-threads").toString(), "race", "1000").await(120);
        Assumptions.assumeFalse(pager.equals("userfaultfd") && run.output().contains("cannot write-protect"),
                "no userfaultfd write protection here:\n" + run.output());
        assertThat(run.output()).as(run.output()).contains(" 0 lost", "ok race").doesNotContain("FAIL");
        run.succeeded();
    }

    /** Debian's ibv_rc_pingpong on both nodes under memcheck: no invalid read, write or free anywhere in the process. */
    @Test
    void valgrindFindsNoInvalidAccessInAPingpong() throws Exception {
        Assumptions.assumeTrue(Files.isExecutable(Path.of("/usr/bin/valgrind")), "valgrind is not installed (verbs-c/ensure-packages.sh)");
        int port = freePort();
        List<String> valgrind = List.of("valgrind", "--error-exitcode=99", "--track-origins=no");
        Program s = VerbsPrograms.start(server.target(), concat(valgrind, "ibv_rc_pingpong", "-d", "pagewire0", "-p", String.valueOf(port),
                "-n", "100"));
        VerbsPrograms.awaitListening(port, 60_000); // valgrind starts slowly; the server must listen before the client connects
        Program c = VerbsPrograms.start(client.target(), concat(valgrind, "ibv_rc_pingpong", "-d", "pagewire0", "-p", String.valueOf(port),
                "-n", "100", "127.0.0.1"));
        Run clientRun = c.await(150);
        Run serverRun = s.await(60);
        for (Run run : List.of(clientRun, serverRun)) {
            assertThat(run.output()).as(run.output()).contains("100 iters", "ERROR SUMMARY: 0 errors")
                    .doesNotContain("Invalid read", "Invalid write", "Invalid free");
            run.succeeded();
        }
    }

    /**
     * Debian's rping on both nodes under memcheck, through the verbs library and its connection manager:
     * no error at all (a registration copies whole pages to the node, bytes the program never wrote
     * included; memcheck is told that this is no bug), every ping verified.
     */
    @Test
    void valgrindFindsNoErrorInAnRping() throws Exception {
        Assumptions.assumeTrue(Files.isExecutable(Path.of("/usr/bin/valgrind")), "valgrind is not installed (verbs-c/ensure-packages.sh)");
        String port = String.valueOf(freePort());
        List<String> valgrind = List.of("valgrind", "--error-exitcode=99", "--track-origins=no");
        Program s = VerbsPrograms.start(server.target(), concat(valgrind, "rping", "-s", "-V", "-a", "127.0.1.2", "-p", port, "-C", "20"));
        awaitServerListening(port); // valgrind starts slowly; the server must listen before the client connects
        Program c = VerbsPrograms.start(client.target(), concat(valgrind, "rping", "-c", "-V", "-a", "127.0.1.2", "-p", port, "-C", "20"));
        Run clientRun = c.await(150);
        Run serverRun = s.await(60);
        for (Run run : List.of(clientRun, serverRun)) {
            assertThat(run.output()).as(run.output()).contains("ERROR SUMMARY: 0 errors");
            run.succeeded();
        }
    }

    /**
     * Debian's rping on both nodes with the sanitized verbs library and connection manager in the real
     * ones' place (the sanitizer's runtime preloaded, as the programs are not built with it): every ping
     * verified, no finding, leaks included, in either process.
     */
    @Test
    void rpingRunsCleanOverTheSanitizedConnectionManager() throws Exception {
        Path runtime = Path.of(new String(new ProcessBuilder("gcc", "-print-file-name=libasan.so").start().getInputStream().readAllBytes()).trim());
        Assumptions.assumeTrue(Files.isRegularFile(runtime), "gcc's AddressSanitizer runtime is not installed");
        List<String> environment = List.of("LD_PRELOAD=" + runtime, "LD_LIBRARY_PATH=" + SANITIZED.resolve("lib"),
                "ASAN_OPTIONS=detect_leaks=1:exitcode=86", "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1");
        String port = String.valueOf(freePort());
        Program s = VerbsPrograms.start(server.target(), environment, "rping", "-s", "-V", "-a", "127.0.1.2", "-p", port, "-C", "50");
        awaitServerListening(port);
        Program c = VerbsPrograms.start(client.target(), environment, "rping", "-c", "-V", "-a", "127.0.1.2", "-p", port, "-C", "50");
        Run clientRun = c.await(120);
        Run serverRun = s.await(60);
        for (Run run : List.of(clientRun, serverRun)) {
            for (String finding : FINDINGS) {
                assertThat(run.output()).as("%s found by a sanitizer:%n%s", run.command(), run.output()).doesNotContain(finding);
            }
            run.succeeded();
        }
        assertThat(clientRun.output()).contains("DISCONNECT EVENT");
    }

    /** rsockets' stream cases, server and client, on the sanitized libraries: every case passes, no finding in either. */
    @Test
    void rsocketsRunCleanUnderTheSanitizers() throws Exception {
        Path binary = SANITIZED.resolve("bin/pagewire-verbs-rsockets");
        assertThat(binary).as("the sanitized build (make -C verbs-c sanitized)").isExecutable();
        List<String> environment = List.of("LD_PRELOAD=", "LD_LIBRARY_PATH=" + SANITIZED.resolve("lib"),
                "ASAN_OPTIONS=abort_on_error=0:detect_leaks=1:exitcode=86", "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1");
        String port = String.valueOf(freePort());
        Program s = VerbsPrograms.start(server.target(), environment, binary.toString(), "server", "127.0.1.2", port);
        awaitServerListening(port); // before the client's cases that need it
        Run clientRun = VerbsPrograms.start(client.target(), environment, binary.toString(), "client", "127.0.1.2", port).await(120);
        Run serverRun = s.await(60);
        for (Run run : List.of(clientRun, serverRun)) {
            for (String finding : FINDINGS) {
                assertThat(run.output()).as("%s found by a sanitizer:%n%s", run.command(), run.output()).doesNotContain(finding);
            }
            assertThat(run.output()).as(run.output()).doesNotContain("FAIL").contains("PASSED");
            run.succeeded();
        }
    }

    /** rstream, verifying every byte, under valgrind on both nodes: no invalid access in the rsockets' buffers and credits. */
    @Test
    void valgrindFindsNoErrorInAnRstream() throws Exception {
        Assumptions.assumeTrue(Files.isExecutable(Path.of("/usr/bin/valgrind")), "valgrind is not installed (verbs-c/ensure-packages.sh)");
        String port = String.valueOf(freePort());
        List<String> valgrind = List.of("valgrind", "--error-exitcode=99", "--track-origins=no");
        Program s = VerbsPrograms.start(server.target(), concat(valgrind, "rstream", "-b", "127.0.1.2", "-p", port, "-S", "100000", "-C", "10",
                "-T", "v"));
        awaitServerListening(port); // valgrind starts slowly; the server must listen before the client connects
        Program c = VerbsPrograms.start(client.target(), concat(valgrind, "rstream", "-s", "127.0.1.2", "-p", port, "-S", "100000", "-C", "10",
                "-T", "v"));
        Run clientRun = c.await(150);
        Run serverRun = s.await(60);
        for (Run run : List.of(clientRun, serverRun)) {
            assertThat(run.output()).as(run.output()).contains("ERROR SUMMARY: 0 errors");
            run.succeeded();
        }
    }

    /** Runs one of the sanitized test programs with the sanitized library in libibverbs' place. */
    private Run sanitized(long seconds, String program, String... args) throws Exception {
        Path binary = SANITIZED.resolve("bin").resolve(program);
        assertThat(binary).as("the sanitized build (make -C verbs-c sanitized)").isExecutable();
        List<String> environment = List.of("LD_PRELOAD=", "LD_LIBRARY_PATH=" + SANITIZED.resolve("lib"),
                "ASAN_OPTIONS=abort_on_error=0:detect_leaks=1:exitcode=86", "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1");
        Run run = VerbsPrograms.start(client.target() + "," + server.target(), environment, concat(List.of(binary.toString()), args))
                .await(seconds);
        for (String finding : FINDINGS) {
            assertThat(run.output()).as("%s found by a sanitizer:%n%s", program, run.output()).doesNotContain(finding);
        }
        return run;
    }

    private static String[] concat(List<String> head, String... tail) {
        String[] all = new String[head.size() + tail.length];
        for (int i = 0; i < head.size(); i++) {
            all[i] = head.get(i);
        }
        System.arraycopy(tail, 0, all, head.size(), tail.length);
        return all;
    }

    /** Waits until the server program listens on {@code port} through the server node's connection manager (rdma_listen). */
    private void awaitServerListening(String port) throws Exception {
        TestData.awaitTrue(() -> server.connectionManager().listensOn(Integer.parseInt(port)), 60_000, "the server program listens on port " + port);
    }
}
