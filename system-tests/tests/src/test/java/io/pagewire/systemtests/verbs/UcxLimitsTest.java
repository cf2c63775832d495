package io.pagewire.systemtests.verbs;

import static io.pagewire.node.TestData.awaitTrue;
import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.PagewireNode;
import io.pagewire.systemtests.verbs.VerbsPrograms.Program;
import io.pagewire.systemtests.verbs.VerbsPrograms.Run;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * What UCX registers up front against what a node allows: with the node's default limits UCX's pools fit under
 * every registration mode; below them the refusal comes back to UCX at once as libibverbs' ENOMEM, and the library
 * says which setting to raise. (UCX then grows its receive pool again from its progress loop, as it does on a host
 * whose memlock limit refuses it: that loop is UCX's; nothing of Pagewire's blocks.)
 */
@Timeout(value = 4, unit = TimeUnit.MINUTES)
class UcxLimitsTest extends SdkFixture {
    @BeforeEach
    void ucxIsThere() {
        VerbsPrograms.requireLibrary();
        assertThat(Path.of("/usr/bin/ucx_perftest")).as("ucx_perftest (Debian's ucx-utils, which the build installs)").exists();
    }

    @ParameterizedTest(name = "tag_lat over rc_v under {0}, the node's default limits")
    @ValueSource(strings = {"PINNED", "PIN_ON_MISS", "SHADOW", "ON_DEMAND"})
    void ucxPoolsFitTheDefaultLimitsUnderEachMode(String mode) throws Exception {
        // the default node: 256 MiB of memory, the default memlock limit, pin limit and share
        start(2, context -> context.kernel().physicalMemoryBytes(256L << 20).swapBytes(256L << 20));
        List<String> env = List.of("UCX_TLS=rc_v", "UCX_NET_DEVICES=pagewire0:1", "PAGEWIRE_VERBS_REGISTRATION=" + mode);
        int port = TwoNodeProgramsFixture.freePort();
        Program s = VerbsPrograms.launch(cluster.node(2).target(), env, "ucx_perftest", "-p", String.valueOf(port));
        VerbsPrograms.awaitListening(port, 30_000);
        Run c = VerbsPrograms.launch(cluster.node(1).target(), env, "ucx_perftest", "-p", String.valueOf(port), "127.0.0.1", "-t", "tag_lat",
                "-n", "200").await(120);
        Run sr = s.await(30);
        c.succeeded();
        sr.succeeded();
        assertThat(c.output()).as(c.output()).contains("Final:").doesNotContain("refused", "Cannot allocate memory");
    }

    @Test
    void aLimitBelowUcxsPoolsIsRefusedAtOnceNamingTheSetting() throws Exception {
        start(2, context -> context.kernel().physicalMemoryBytes(256L << 20).swapBytes(256L << 20).memlockLimitBytes(8L << 20));
        PagewireNode node = cluster.node(1);
        List<String> env = List.of("UCX_TLS=rc_v", "UCX_NET_DEVICES=pagewire0:1");
        int port = TwoNodeProgramsFixture.freePort();
        Program s = VerbsPrograms.launch(cluster.node(2).target(), env, "ucx_perftest", "-p", String.valueOf(port));
        Program c = null;
        try {
            VerbsPrograms.awaitListening(port, 30_000);
            c = VerbsPrograms.launch(node.target(), env, "ucx_perftest", "-p", String.valueOf(port), "127.0.0.1", "-t", "tag_lat", "-n", "100");
            Program client = c;
            awaitTrue(() -> {
                try {
                    return client.output().contains("ibv_reg_mr(") && client.output().contains("pagewire.kernel.memlockLimitBytes");
                } catch (java.io.IOException e) {
                    return false;
                }
            }, 60_000, "UCX reports its refused registration and the library names the setting");
            assertThat(c.output()).contains("Cannot allocate memory", "RegisterRegion refused by the node: memlock limit 8 MiB exceeded");
            // the node goes on serving everyone else meanwhile
            VerbsPrograms.launch(node.target(), List.of(), "ibv_devinfo").await(30).succeeded();
        } finally {
            if (c != null) {
                c.kill();
            }
            s.kill();
        }
    }
}
