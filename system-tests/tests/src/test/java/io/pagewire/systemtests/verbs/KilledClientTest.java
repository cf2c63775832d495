package io.pagewire.systemtests.verbs;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.PagewireNode;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A client process killed with SIGKILL mid-workload: its nodes end its sessions and release every pin and frame. */
class KilledClientTest extends SdkFixture {
    @Test
    void pinsAndFramesReturnToZeroAfterTheClientIsKilled() throws Exception {
        start(2, c -> { });
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder builder = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), KilledClientMain.class.getName(),
                cluster.node(1).target(), cluster.node(2).target())
                .redirectErrorStream(true);
        // The client finds its certificate the way a deployed application would: through the environment.
        builder.environment().put("PAGEWIRE_SECURITY_CERTIFICATE_DIRECTORY", cluster.certificates().toString());
        builder.environment().put("PAGEWIRE_SECURITY_IDENTITY", EmbeddedCluster.APPLICATION);
        Process client = builder.start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(client.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = out.readLine()) != null && !line.equals("READY")) {
                System.err.println("client: " + line);
            }
            assertThat(line).as("the client reported its workload running").isEqualTo("READY");
            for (PagewireNode node : cluster.nodes()) {
                awaitTrue(() -> node.kernel().stats().residentPages() > 0, 30_000, node.id() + " has the client's memory in use");
            }
            assertThat(cluster.node(1).kernel().stats().pinnedPages()).as("the PINNED source").isEqualTo(1024);
            client.destroyForcibly();
            assertThat(client.waitFor(30, TimeUnit.SECONDS)).isTrue();
        } finally {
            client.destroyForcibly();
        }
        for (PagewireNode node : List.of(cluster.node(1), cluster.node(2))) {
            awaitTrue(() -> node.sessions() == 0, 30_000, node.id() + " ended the dead client's sessions");
            awaitTrue(() -> node.kernel().stats().pinnedPages() == 0 && node.kernel().stats().residentPages() == 0, 10_000,
                    node.id() + " released its pins and frames");
            assertThat(node.nic().queuePairs()).isEmpty();
        }
    }
}
