package io.pagewire.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What a written result says of the commit it came from, in a git checkout made for the test. */
class ProvenanceTest {
    @TempDir
    Path checkout;

    private void git(String... args) throws IOException, InterruptedException {
        List<String> command = new java.util.ArrayList<>(List.of("git", "-c", "user.name=test", "-c", "user.email=test@localhost"));
        command.addAll(List.of(args));
        Process git = new ProcessBuilder(command).directory(checkout.toFile()).redirectErrorStream(true).start();
        String output = new String(git.getInputStream().readAllBytes());
        assertThat(git.waitFor(30, TimeUnit.SECONDS)).isTrue();
        assertThat(git.exitValue()).as(output).isZero();
    }

    @Test
    void aCheckoutIsItsCommitAndOnlyChangesThatCanMoveAResultMarkIt() throws Exception {
        assertThat(Provenance.commitOf(checkout)).isEqualTo("no git checkout");
        git("init", "-q");
        Files.createDirectories(checkout.resolve("docs"));
        Files.writeString(checkout.resolve("Code.java"), "class Code {}\n");
        Files.writeString(checkout.resolve("README.md"), "# readme\n");
        Files.writeString(checkout.resolve("docs/results.csv"), "a,b\n");
        Files.createDirectories(checkout.resolve("out"));
        Files.writeString(checkout.resolve("out/result.csv"), "1\n");
        git("add", ".");
        git("commit", "-q", "-m", "first");
        String commit = Provenance.commitOf(checkout);
        assertThat(commit).matches("[0-9a-f]{12}");

        Files.writeString(checkout.resolve("README.md"), "# readme, rewritten\n");
        Files.writeString(checkout.resolve("docs/results.csv"), "c,d\n");
        Files.writeString(checkout.resolve("out/result.csv"), "2\n");
        Files.writeString(checkout.resolve("Untracked.java"), "class Untracked {}\n");
        assertThat(Provenance.commitOf(checkout, checkout.resolve("out"))).as("documents, the command's own output, untracked files")
                .isEqualTo(commit);
        assertThat(Provenance.commitOf(checkout)).as("the output directory not named as written").isEqualTo(commit + " + uncommitted changes");

        Files.writeString(checkout.resolve("Code.java"), "class Code { int changed; }\n");
        assertThat(Provenance.commitOf(checkout, checkout.resolve("out"))).isEqualTo(commit + " + uncommitted changes");
    }
}
