package io.pagewire.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.node.TestData;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.Access;
import io.pagewire.node.nic.CompletionQueue;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.NicConfiguration;
import io.pagewire.node.nic.QueuePair;
import io.pagewire.node.nic.RegistrationMode;
import io.pagewire.node.nic.WorkRequest;
import io.pagewire.tools.testbed.EmbeddedCluster;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The pagewire command, run in-process as a user would run it, with its output captured. */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class CommandLineTest {
    /** Output and exit code of one run. */
    private record Run(int exitCode, String out, String err) {
    }

    private static Run run(Map<String, String> environment, String... args) {
        return run(environment, new ByteArrayOutputStream(), args);
    }

    /** As above, the standard output going to {@code out} as it is written, for a test that watches it. */
    private static Run run(Map<String, String> environment, ByteArrayOutputStream out, String... args) {
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            int code = PagewireCommand.run(environment, args);
            return new Run(code, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
        }
    }

    @Test
    void whatACommandCannotDoIsOneLineNotAStackTrace(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Path notADirectory = Files.writeString(dir.resolve("results"), "a file where the output directory should be");
        Run run = run(Map.of(), "experiment", "tlb-size", "--reduced", "--seed", "3", "--out", notADirectory.toString());
        assertThat(run.exitCode()).as(run.err()).isEqualTo(1);
        assertThat(run.err()).containsPattern("(?m)^pagewire experiment: .*" + Pattern.quote(notADirectory.toString()))
                .doesNotContain("\tat ").doesNotContain("Exception");
    }

    @Test
    void anExperimentPrintsItsTableAndClaimsAndWritesItsCsvAndPlot(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Run run = run(Map.of(), "experiment", "tlb-size", "--reduced", "--seed", "3", "--out", dir.toString());
        assertThat(run.out()).contains("experiment tlb-size, seed 3", "| working set (pages) | pattern", "The paper: U-Net/MM");
        List<String> claims = run.out().lines().filter(l -> l.startsWith("reproduced: ") || l.startsWith("NOT reproduced: ")).toList();
        assertThat(claims).as(run.out()).hasSize(4);
        assertThat(run.exitCode()).as("1 exactly when a claim was not reproduced\n" + run.out() + run.err())
                .isEqualTo(claims.stream().anyMatch(l -> l.startsWith("NOT")) ? 1 : 0);
        assertThat(Files.readAllLines(dir.resolve("tlb-size.csv"))).hasSize(19);
        assertThat(Files.size(dir.resolve("tlb-size.png"))).isPositive();

        Run unknown = run(Map.of(), "experiment", "tlb-sise");
        assertThat(unknown.exitCode()).isEqualTo(2);
        assertThat(unknown.err()).contains("no experiment named 'tlb-sise'; there are: tlb-size");
    }

    @Test
    void anExperimentRewritesItsBlockOfAPageSayingTheCommitAndMachineAndLeavesTheProse(@org.junit.jupiter.api.io.TempDir Path dir)
            throws Exception {
        Path page = Files.writeString(dir.resolve("experiments.md"), String.join("\n", "# Experiments", "", "Prose before.", "",
                "<!-- generated: experiment tlb-size -->", "an old table", "<!-- end generated: experiment tlb-size -->", "", "Prose after.", ""));
        Path out = Files.createDirectories(dir.resolve("experiments"));
        Run run = run(Map.of(), "experiment", "tlb-size", "--reduced", "--seed", "3", "--out", out.toString(), "--page", page.toString());
        assertThat(run.out()).as(run.err()).contains("wrote the results into " + page);
        String written = Files.readString(page);
        assertThat(written).startsWith("# Experiments\n\nProse before.\n\n<!-- generated: experiment tlb-size -->\n")
                .endsWith("<!-- end generated: experiment tlb-size -->\n\nProse after.\n").doesNotContain("an old table")
                .contains("`experiment tlb-size --seed 3 --reduced`, at commit ", " cores (", "](experiments/tlb-size.png)",
                        "| working set (pages) | pattern");
        assertThat(written.lines().filter(l -> l.startsWith("- reproduced: ") || l.startsWith("- NOT reproduced: "))).hasSize(4);

        Path noBlock = Files.writeString(dir.resolve("other.md"), "# A page without the block\n");
        Run refused = run(Map.of(), "experiment", "tlb-size", "--reduced", "--seed", "3", "--out", out.toString(), "--page", noBlock.toString());
        assertThat(refused.exitCode()).isEqualTo(1);
        assertThat(refused.out()).as("refused before the run").doesNotContain("experiment tlb-size, seed 3");
        assertThat(refused.err()).contains("pagewire experiment: " + noBlock + " has no block '<!-- generated: experiment tlb-size -->'");
    }

    /**
     * An experiment runs against two nodes of a running cluster (here a pair started beside the
     * command, reached over its TCP port, plaintext), and asks for two addresses when given one.
     */
    @Test
    void anExperimentRunsAgainstARunningClustersNodesWhenItCan(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        try (EmbeddedCluster running = EmbeddedCluster.start(2, Transport.NETTY, c -> c.security().plaintext())) {
            String first = running.node(1).target();
            String second = running.node(2).target();
            Run run = run(Map.of(), "experiment", "notification", "--reduced", "--seed", "5", "--out", dir.toString(), "--plaintext", first, second);
            assertThat(run.out()).as(run.err()).contains("notification: against node-1 and node-2 of a running cluster",
                    "p50 from the write's post to detection (the node runs elsewhere)");
            List<String> rows = run.out().lines().filter(l -> l.matches("\\| (poll|handler|block) .*")).toList();
            assertThat(rows).as(run.out()).hasSize(3).allMatch(l -> l.contains("| 1000 ") && l.contains(" - "));
            assertThat(run.exitCode()).as(run.out() + run.err()).isIn(0, 1);
            TestData.awaitTrue(() -> running.node(2).nic().endpoints().isEmpty(), 10_000,
                    "the experiment's endpoint on the running node closed");

            Run oneNode = run(Map.of(), "experiment", "notification", "--plaintext", first);
            assertThat(oneNode.exitCode()).isEqualTo(2);
            assertThat(oneNode.err()).contains("give two node addresses");
        }
    }

    @Test
    void writeBandwidthOverEverySizePrintsPerftestsTable() {
        Run run = run(Map.of(), "perf", "write_bw", "-a", "-n", "20", "--max-bytes", "16777216", "-t", "4", "--warmup", "0");
        assertThat(run.exitCode()).as(run.err()).isZero();
        List<String> lines = run.out().lines().toList();
        assertThat(lines).anyMatch(l -> l.contains("#bytes") && l.contains("#iterations") && l.contains("BW peak[MB/sec]")
                && l.contains("BW average[MB/sec]") && l.contains("MsgRate[Mpps]") && l.contains("CPU[s/GB]"));
        List<String> rows = lines.stream().filter(l -> l.matches("\\s*\\d+\\s+\\d+\\s+[\\d.]+\\s+[\\d.]+\\s+[\\d.]+\\s+[\\d.]+")).toList();
        assertThat(rows).hasSize(23);
        assertThat(rows.get(0).trim()).startsWith("2 ");
        assertThat(rows.get(22).trim()).startsWith("8388608 ");
        for (String row : rows) {
            String[] columns = row.trim().split("\\s+");
            assertThat(Double.parseDouble(columns[4])).as("message rate: " + row).isPositive();
            assertThat(Double.parseDouble(columns[5])).as("CPU per GB (the clock ticks coarsely: tiny runs may read 0): " + row).isNotNegative();
            if (Integer.parseInt(columns[0]) >= 4096) {
                assertThat(Double.parseDouble(columns[3])).as("average bandwidth: " + row).isPositive();
            }
        }
    }

    @Test
    void writeLatencyOverEverySizePrintsPerftestsTable() {
        Run run = run(Map.of(), "perf", "write_lat", "-a", "-n", "20", "--max-bytes", "16777216");
        assertThat(run.exitCode()).as(run.err()).isZero();
        assertThat(run.out()).contains("t_min[usec]", "t_max[usec]", "t_typical[usec]", "t_avg[usec]", "t_stdev[usec]",
                "99% percentile[usec]", "99.9% percentile[usec]");
        List<String> rows = run.out().lines().filter(l -> l.matches("\\s*\\d+\\s+\\d+(\\s+[\\d.]+){7}")).toList();
        assertThat(rows).hasSize(23);
    }

    @Test
    void baselineGrpcPrintsTheLinkBesideEachRow() {
        Run bw = run(Map.of(), "perf", "write_bw", "-s", "4096", "-n", "2000", "--warmup", "0", "--baseline", "grpc");
        assertThat(bw.exitCode()).as(bw.err()).isZero();
        assertThat(bw.out().lines()).anyMatch(l -> l.trim().matches("grpc\\s+\\d+\\s+-\\s+[\\d.]+\\s+[\\d.]+\\s+[\\d.]+"));
        assertThat(bw.out()).containsPattern("# pagewire / grpc: bandwidth [\\d.]+x, CPU per GB [\\d.]+x");
        Run lat = run(Map.of(), "perf", "write_lat", "-s", "64", "-n", "200", "--baseline", "grpc");
        assertThat(lat.exitCode()).as(lat.err()).isZero();
        assertThat(lat.out()).containsPattern("# pagewire / grpc: typical [\\d.]+x, p99 [\\d.]+x");
        Run bad = run(Map.of(), "perf", "write_bw", "--baseline", "ucx");
        assertThat(bad.exitCode()).isEqualTo(2);
        assertThat(bad.err()).contains("--baseline takes 'grpc'");
    }

    @Test
    @Timeout(value = 6, unit = TimeUnit.MINUTES) // four node pairs and a testbed, every figure once
    void benchWritesItsTableRoundsAndPlot(@org.junit.jupiter.api.io.TempDir Path out) throws Exception {
        Path page = out.resolve("docs/benchmarks.md");
        Run run;
        // A testbed of two nodes with mutual TLS, reached with its certificates as deploy/testbed.sh bench reaches the compose one.
        try (EmbeddedCluster testbed = EmbeddedCluster.start(2, Transport.NETTY, context -> { })) {
            run = run(Map.of(), "bench", "--quick", "--rounds", "1", "--no-ucx", "--out", out.resolve("docs/bench").toString(),
                    "--page", page.toString(), "--testbed", testbed.node(1).target() + "," + testbed.node(2).target(),
                    "--certs", testbed.certificates().toString());
        }
        out = out.resolve("docs/bench");
        assertThat(run.exitCode()).as(run.err()).isZero();
        assertThat(run.out()).contains("| write_bw 4 KiB PINNED / grpc stream |", "| write RTT p50 default / grpc ping-pong |",
                "| warm translation overhead ON_DEMAND vs PINNED |", "| minor receive fault, added us |",
                "| write RTT 64 B default, remote application (gRPC verbs) p50 us |", "UCX: not measured", "Testbed: the nodes at");
        // The configurations users run, each measured (a ratio with a value, not "not measured"), the held ones with a target.
        for (String ratio : List.of("mTLS write_bw 4 KiB PINNED / plaintext", "mTLS write_bw 1 MiB PINNED / mTLS grpc stream",
                "mTLS write RTT p50 / plaintext", "mTLS grpc stream 64 KiB / plaintext", "testbed write_bw 64 KiB PINNED / mTLS host",
                "testbed grpc stream 64 KiB (node to node) / mTLS host", "testbed grpc ping-pong (node to node) / mTLS host", "testbed write RTT p50 / mTLS host", "ring hop testbed / mTLS host",
                "ring hop testbed / mTLS host, remote application")) {
            assertThat(run.out()).as(ratio).containsPattern("\\| " + Pattern.quote(ratio) + " \\| [\\d.]+x \\|");
        }
        assertThat(run.out()).containsPattern("\\| mTLS write_bw 64 KiB PINNED / plaintext \\| [\\d.]+x \\| [\\d.]+x – [\\d.]+x \\| ≥ 0.80x \\|")
                .containsPattern("\\| ring hop testbed / mTLS host \\| [\\d.]+x \\| [\\d.]+x – [\\d.]+x \\| ≤ 2.00x \\|");
        Run lonely = run(Map.of(), "bench", "--quick", "--testbed", "localhost:7101");
        assertThat(lonely.exitCode()).isEqualTo(2);
        assertThat(lonely.err()).contains("--testbed takes two nodes");
        assertThat(out.resolve("bench.md")).exists();
        assertThat(Files.readAllLines(out.resolve("bench.csv"))).first().isEqualTo("figure,round,value");
        List<String> roundTrips = Files.readAllLines(out.resolve("bench-round-trips.csv"));
        assertThat(roundTrips).first().isEqualTo("figure,round,bytes,start_ns,elapsed_ns");
        // The quick budget measures 200 round trips per figure; round 0 (JIT warm-up) is not written.
        assertThat(roundTrips.stream().filter(l -> l.matches("write RTT 64 B default,1,64,\\d+,\\d+"))).hasSize(200);
        assertThat(roundTrips.stream().filter(l -> l.matches("write RTT 64 B busy-poll,1,64,\\d+,\\d+"))).hasSize(200);
        assertThat(roundTrips).hasSize(401);
        byte[] png = Files.readAllBytes(out.resolve("bench.png"));
        assertThat(png).startsWith((byte) 0x89, (byte) 'P', (byte) 'N', (byte) 'G');
        assertThat(Files.readString(page)).as("the benchmark page: the method, the latest run, its plot")
                .startsWith("# Benchmarks").contains("## Latest run: pagewire bench", "| write_bw 4 KiB PINNED / grpc stream |",
                        "| ring hop testbed / mTLS host |",
                        "![each ratio against its target](bench/bench.png)");
    }

    @Test
    void latencySamplesGoToTheirFileAndOnlyForLatencyTests(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Path file = dir.resolve("rtt.csv");
        Run lat = run(Map.of(), "perf", "write_lat", "-s", "64", "-n", "100", "--samples", file.toString());
        assertThat(lat.exitCode()).as(lat.err()).isZero();
        List<String> lines = Files.readAllLines(file);
        assertThat(lines).hasSize(101).first().isEqualTo("bytes,start_ns,elapsed_ns");
        assertThat(lines.subList(1, lines.size())).allMatch(l -> l.matches("64,\\d+,\\d+"));
        Run bw = run(Map.of(), "perf", "write_bw", "--samples", file.toString());
        assertThat(bw.exitCode()).isEqualTo(2);
        assertThat(bw.err()).contains("--samples writes the round trips of a latency test; write_bw measures bandwidth");
        Run nowhere = run(Map.of(), "perf", "read_lat", "--samples", dir.resolve("no/such/dir/rtt.csv").toString());
        assertThat(nowhere.exitCode()).isEqualTo(2);
        assertThat(nowhere.err()).contains("cannot write the --samples file");
    }

    @Test
    void readTestsAndJsonWork() {
        Run bw = run(Map.of(), "perf", "read_bw", "-s", "65536", "-n", "200", "--json", "--mode", "ON_DEMAND", "--warmup", "0.2");
        assertThat(bw.exitCode()).as(bw.err()).isZero();
        assertThat(bw.out().trim()).startsWith("[{\"test\":\"read_bw\",\"mode\":\"ON_DEMAND\",\"bytes\":65536,\"iterations\":200,");
        Run lat = run(Map.of(), "perf", "read_lat", "-n", "50");
        assertThat(lat.exitCode()).as(lat.err()).isZero();
        assertThat(lat.out()).contains("t_typical[usec]");
    }

    @Test
    void badArgumentsAreRefusedWithTheReason() {
        Run run = run(Map.of(), "perf", "write_fast");
        assertThat(run.exitCode()).isEqualTo(2);
        assertThat(run.err()).contains("the test must be write_bw, write_lat, read_bw, read_lat, send_bw, send_lat, atomic_bw or atomic_lat, was 'write_fast'");
        assertThat(run(Map.of(), "perf", "write_bw", "localhost:1").err()).contains("give two node addresses");
    }

    @Test
    void perfAgainstANodeThatDiesReportsTheErrorAndKeepsWhatItMeasured() throws Exception {
        EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> c.nic().ackTimeoutNs(50_000_000L).retryCount(2));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        Pattern measuredRow = Pattern.compile("(?m)^ *2 +\\d");
        // The node dies once the first size's row is out: each size runs 2 s, so the run is still going.
        Thread killer = new Thread(() -> {
            try {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
                while (!measuredRow.matcher(out.toString(StandardCharsets.UTF_8)).find() && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
            } catch (InterruptedException e) {
                return;
            }
            cluster.node(2).close();
        });
        try {
            killer.start();
            Run run = run(Map.of(), out, "perf", "write_bw", "-a", "-D", "2", "--warmup", "0", "--certs", cluster.certificates().toString(),
                    cluster.node(1).target(), cluster.node(2).target());
            assertThat(run.exitCode()).as(run.err()).isEqualTo(1);
            assertThat(run.err()).contains("pagewire perf: ").doesNotContain("\tat ").doesNotContain("Exception in");
            assertThat(run.out()).contains("#bytes").containsPattern(measuredRow);
        } finally {
            killer.join();
            cluster.close();
        }
    }

    @Test
    void floodPrintsTheVictimsRatiosAndSoakRefusesBadOptions() {
        long allowance = 20L << 20;
        Run flood = run(Map.of(), "flood", "-n", "50", "--rounds", "1", "--send-rate", "20MiB");
        assertThat(flood.exitCode()).as(flood.err()).isZero();
        assertThat(flood.out()).contains("alone", "control-plane flood", "bulk writes on the same link")
                .containsPattern("# victim under control-plane flood / alone: p50 [\\d.]+x, p99 [\\d.]+x; heap after GC \\d+ MiB vs \\d+ MiB alone");
        // The bulk writer's session is held to the nodes' allowance: what it completed fits in its time at the
        // rate plus one burst (an upper bound, which a slow machine only makes looser).
        Matcher bulk = Pattern.compile("bulk writes on the same link +[\\d.]+ +[\\d.]+ +[\\d.]+ +([\\d,]+) +([\\d,]+)")
                .matcher(flood.out());
        assertThat(bulk.find()).as(flood.out()).isTrue();
        long writes = Long.parseLong(bulk.group(1).replace(",", ""));
        double seconds = writes / Double.parseDouble(bulk.group(2).replace(",", ""));
        assertThat(writes * (64L << 10)).as("bytes the bulk writer completed in %.2f s at 20 MiB/s%n%s", seconds, flood.out())
                .isLessThanOrEqualTo((long) (allowance * seconds * 1.05) + NicConfiguration.SEND_BURST_BYTES_PER_SESSION.defaultValue());
        Run badRate = run(Map.of(), "flood", "--send-rate", "fast");
        assertThat(badRate.exitCode()).isEqualTo(2);
        assertThat(badRate.err()).contains("--send-rate must be a size such as 4096, 64KiB or 256MiB, was 'fast'").doesNotContain("\tat ");
        Run soak = run(Map.of(), "soak", "--duration", "5x");
        assertThat(soak.exitCode()).isEqualTo(2);
        assertThat(soak.err()).contains("--duration must be a duration such as 200ms, 50us, 2s or 30m").doesNotContain("\tat ");
        Run rate = run(Map.of(), "soak", "--loss", "1.5");
        assertThat(rate.exitCode()).isEqualTo(2);
        assertThat(rate.err()).contains("probabilities from 0 to below 1, was 1.5");
    }

    @Test
    void anInvalidNodeConfigurationIsRefusedNamingTheKnob() {
        Run flag = run(Map.of(), "node", "--memory", "1000", "--metrics-port", "-1");
        assertThat(flag.exitCode()).isEqualTo(2);
        assertThat(flag.err()).contains("pagewire node: invalid configuration: pagewire.kernel.physicalMemoryBytes must be");
        Run env = run(Map.of("PAGEWIRE_NIC_TLB_WAYS", "3"), "node");
        assertThat(env.exitCode()).isEqualTo(2);
        assertThat(env.err()).contains("pagewire.nic.tlbWays must be");
        Run unknown = run(Map.of("PAGEWIRE_NIC_TLBS", "3"), "node");
        assertThat(unknown.err()).contains("unknown setting in the environment: PAGEWIRE_NIC_TLBS");
        Run set = run(Map.of(), "node", "--set", "pagewire.fabric.lossRate=2");
        assertThat(set.err()).contains("pagewire.fabric.lossRate must be a probability from 0 to below 1, was 2.0");
        Run list = run(Map.of(), "node", "--list-settings");
        assertThat(list.exitCode()).isZero();
        assertThat(list.out()).contains("pagewire.kernel.physicalMemoryBytes", "PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES");
    }

    @Test
    void statPrintsANodesMeters() {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> c.kernel().physicalMemoryBytes(8 << 20).swapBytes(0))) {
            String certs = cluster.certificates().toString();
            Run run = run(Map.of(), "stat", "--once", "--certs", certs, cluster.node(1).target());
            assertThat(run.exitCode()).as(run.err()).isZero();
            assertThat(run.out()).contains("== " + cluster.node(1).target(), "pagewire_memory_pages", "state=free", "2048",
                    "pagewire_tlb_entries", "pagewire_link_lanes_up", "peer=node-2");
            Run filtered = run(Map.of(), "stat", "--once", "--zeros", "--filter", "^pagewire_rnr", "--certs", certs, cluster.node(1).target());
            assertThat(filtered.out()).contains("pagewire_rnr_naks_sent_total").doesNotContain("pagewire_memory_pages");

            Run none = run(Map.of(), "stat", "--once", "--regions", "--certs", certs, cluster.node(2).target());
            assertThat(none.out()).contains("no region is registered");
            // A region on node 2 that a write from node 1 lands in: rdma stat mr's view of it.
            Endpoint writer = cluster.node(1).nic().openEndpoint("writer");
            Endpoint owner = cluster.node(2).nic().openEndpoint("owner");
            long src = writer.space().allocate(8192);
            long dst = owner.space().allocate(8192);
            MemoryRegion from = writer.register(src, 8192, RegistrationMode.PINNED,
                    Access.all());
            MemoryRegion into = owner.register(dst, 8192, RegistrationMode.ON_DEMAND,
                    Access.all());
            CompletionQueue cq = cluster.node(1).nic().createCompletionQueue();
            QueuePair qp = cluster.node(1).nic().createQueuePair(writer, cq);
            QueuePair remote = cluster.node(2).nic().createQueuePair(owner, cluster.node(2).nic().createCompletionQueue());
            qp.connect(remote.address());
            remote.connect(qp.address());
            qp.post(WorkRequest.write(1, from.lkey(), src, 8192, dst, into.rkey()));
            try {
                assertThat(cq.take(30, TimeUnit.SECONDS).ok()).isTrue();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            Run regions = run(Map.of(), "stat", "--once", "--regions", "--certs", certs, cluster.node(2).target());
            assertThat(regions.exitCode()).as(regions.err()).isZero();
            String line = regions.out().lines().filter(l -> l.contains("ON_DEMAND")).findFirst().orElseThrow();
            assertThat(line.trim().split(" +")).as(regions.out())
                    .containsSequence("ON_DEMAND", "2", "0", "0", "0", "0", "8192", "0"); // two minor faults, 8 KiB in
        }
    }

    @Test
    void healthSaysServingForALiveNodeAndFailsForAStoppedOne() throws Exception {
        String target;
        try (EmbeddedCluster cluster = EmbeddedCluster.start(1, Transport.NETTY, c -> c.kernel().physicalMemoryBytes(8 << 20).swapBytes(0))) {
            target = cluster.node(1).target();
            String certs = cluster.certificates().toString();
            Run plaintext = run(Map.of(), "health", "--plaintext", target);
            assertThat(plaintext.exitCode()).as("a caller without TLS is refused").isEqualTo(1);
            assertThat(plaintext.err()).startsWith(target + ": UNAVAILABLE");
            Run serving = run(Map.of(), "health", "--certs", certs, target);
            assertThat(serving.exitCode()).as(serving.err()).isZero();
            assertThat(serving.out()).contains(target + ": SERVING");
            Run verbs = run(Map.of(), "health", "--quiet", "--service", "pagewire.verbs.v1.Verbs", "--certs", certs, target);
            assertThat(verbs.exitCode()).as(verbs.err()).isZero();
            assertThat(verbs.out()).isEmpty();
            Run unknown = run(Map.of(), "health", "--service", "no.such.Service", "--certs", certs, target);
            assertThat(unknown.exitCode()).isEqualTo(1);
            assertThat(unknown.err()).contains("NOT_FOUND");
        }
        Run gone = run(Map.of(), "health", "--timeout", "2", "--plaintext", target);
        assertThat(gone.exitCode()).isEqualTo(1);
        assertThat(gone.err()).startsWith(target + ": UNAVAILABLE");
    }

    @Test
    void theDemoComparesTheModesAndPinnedShowsItsMemlockError() {
        Run run = run(Map.of(), "demo", "--memory", "2MiB", "--overcommit", "3", "--message", "16KiB", "--memlock", "1MiB",
                "--modes", "PINNED,PIN_ON_MISS,SHADOW,ON_DEMAND", "--tlb-entries", "64");
        assertThat(run.exitCode()).as(run.err()).isZero();
        assertThat(run.out()).contains("http://127.0.0.1:", "/metrics", "mode", "MB/s", "p50 us", "p99 us", "TLB hit dst/src", "RNR NAKs",
                "parked MiB", "peak pinned");
        assertThat(run.out()).containsPattern("PINNED\\s+registration refused: memlock limit 1 MiB exceeded: endpoint \\d+ would pin 6 MiB");
        for (String mode : List.of("PIN_ON_MISS", "SHADOW", "ON_DEMAND")) {
            assertThat(run.out()).containsPattern("(?m)^" + mode + "\\s+\\d+\\.\\d");
        }
    }

    @Test
    void theCommandTurnsNettysLeakDetectorOffUnlessALevelWasGiven() {
        String property = PagewireCommand.NETTY_LEAK_DETECTION_PROPERTY;
        String before = System.getProperty(property);
        try {
            System.clearProperty(property);
            PagewireCommand.leaveNettyLeakDetectionOff();
            assertThat(System.getProperty(property)).isEqualTo("disabled");
            System.setProperty(property, "paranoid");
            PagewireCommand.leaveNettyLeakDetectionOff();
            assertThat(System.getProperty(property)).as("a level given to the JVM stays").isEqualTo("paranoid");
        } finally {
            if (before == null) {
                System.clearProperty(property);
            } else {
                System.setProperty(property, before);
            }
        }
    }
}
