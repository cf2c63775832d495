package io.pagewire.systemtests;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.examples.FirstProgram;
import io.pagewire.systemtests.verbs.VerbsPrograms;
import io.pagewire.tools.experiment.Claim;
import io.pagewire.tools.experiment.ExperimentReport;
import io.pagewire.tools.experiment.ExperimentResult;
import io.pagewire.tools.experiment.ExperimentSettings;
import io.pagewire.tools.experiment.PrefetchExperiment;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The compose file as a user runs it (with the local images and free host ports): the nodes become
 * healthy, an application on the host maps a node's rings through the shared ring directory and writes
 * between two nodes, rdma-core's, perftest's and rsockets' programs (RC, UC, UD, rdma_cm, SIDR), libfabric's fi_pingpong and UCX
 * run in two nodes' containers through the image's verbs library, so does the prefetch experiment's ibv_rc_pingpong (its counts
 * from the nodes' meters), Prometheus scrapes all three, the workload profile's perf run completes, and `down -v`
 * removes everything again. Runs `docker compose` where the plugin exists, else Debian's docker-compose.
 */
class ComposeSmokeIT {
    private static final Path ROOT = Path.of(System.getProperty("pagewire.repository.root", "../..")).toAbsolutePath().normalize();

    @Test
    @Timeout(value = 600, unit = TimeUnit.SECONDS)
    void nodesBecomeHealthyPrometheusScrapesThemAndTheWorkloadCompletes() throws Exception {
        Map<String, String> env = new HashMap<>();
        env.put("PAGEWIRE_NODE_IMAGE", System.getProperty("pagewire.testkit.image", "pagewire/node:latest"));
        env.put("PAGEWIRE_PROMETHEUS_IMAGE", PrometheusScrapeContainerIT.PROMETHEUS_IMAGE);
        env.put("PAGEWIRE_WORKLOAD_SECONDS", "3");
        for (String port : List.of("NODE1", "NODE2", "NODE3", "NODE1_METRICS", "NODE2_METRICS", "NODE3_METRICS", "PROMETHEUS", "GRAFANA")) {
            env.put("PAGEWIRE_HOST_PORT_" + port, String.valueOf(freePort()));
        }
        String project = "pagewire-smoke-" + ProcessHandle.current().pid();
        // The ring directory, shared with this host as deploy/testbed.sh shares it (writable by the nodes' user).
        Path rings = Files.createDirectories(Path.of("/dev/shm").toFile().isDirectory() ? Path.of("/dev/shm", project) : Files.createTempDirectory(project));
        Files.setPosixFilePermissions(rings, PosixFilePermissions.fromString("rwxrwxrwx"));
        env.put("PAGEWIRE_TESTBED_RINGS", rings.toString());
        Path certificates = Files.createTempDirectory("pagewire-smoke-certs");
        try {
            Result up = compose(env, project, 300, "up", "-d", "--no-build");
            assertThat(up.code()).as("compose up:\n" + up.output()).isZero();
            for (String node : List.of("node-1", "node-2", "node-3")) {
                String id = compose(env, project, 30, "ps", "-q", node).output().strip();
                String health = run(30, "docker", "inspect", "-f", "{{.State.Health.Status}}", id).output().strip();
                assertThat(health).as(node + " is healthy once Prometheus has started").isEqualTo("healthy");
            }
            String node1 = compose(env, project, 30, "ps", "-q", "node-1").output().strip();
            for (String file : List.of("ca.pem", "app.pem", "app.key")) {
                Result copied = run(30, "docker", "cp", node1 + ":/var/lib/pagewire/certs/" + file, certificates.resolve(file).toString());
                assertThat(copied.code()).as("docker cp " + file + ":\n" + copied.output()).isZero();
            }
            ConnectOptions app = ConnectOptions.defaults().withSecurity(ClientSecurity.mutualTls(certificates, "app"));
            try (Pagewire host = Pagewire.connect("localhost:" + env.get("PAGEWIRE_HOST_PORT_NODE1"), app)) {
                host.openEndpoint("on-the-host");
                assertThat(ClusterChecks.total(host, "pagewire_sessions_rings"))
                        .as("an application on the host maps the rings of a node in a container (the shared ring directory)").isEqualTo(1.0);
            }
            // The image ships the verbs library and its connection manager: rdma-core's and perftest's
            // programs, unmodified, between node-1's and node-2's containers, each node answering to its
            // container's address (clients name node-2 by host name).
            String node2 = compose(env, project, 30, "ps", "-q", "node-2").output().strip();
            String preload = "LD_PRELOAD=/usr/lib/pagewire/libpagewire-verbs.so";
            String[][] programs = {
                {"ibv_rc_pingpong -d pagewire0 -n 100 -p 18515", "ibv_rc_pingpong -d pagewire0 -n 100 -p 18515 node-2", "100 iters in"},
                {"ibv_uc_pingpong -d pagewire0 -n 100 -p 18516", "ibv_uc_pingpong -d pagewire0 -n 100 -p 18516 node-2", "100 iters in"},
                {"ibv_ud_pingpong -d pagewire0 -n 100 -p 18517", "ibv_ud_pingpong -d pagewire0 -n 100 -p 18517 node-2", "100 iters in"},
                {"ib_write_bw -d pagewire0 -c UC -n 200 -p 18518", "ib_write_bw -d pagewire0 -c UC -n 200 -p 18518 node-2", "65536"},
                {"ib_send_bw -d pagewire0 -c UD -n 200 -p 18519", "ib_send_bw -d pagewire0 -c UD -n 200 -p 18519 node-2", "4096"},
                {"rping -s -a 0.0.0.0 -p 7471 -C 10 -V", "rping -c -v -V -a node-2 -p 7471 -C 10", "ping data: rdma-ping-9"},
                {"ucmatose -p 7472 -C 10", "ucmatose -s node-2 -p 7472 -C 10", "test complete"},
                {"udaddy -C 10", "udaddy -s node-2 -C 10", "test complete"},
                {"rdma_server -p 7473", "rdma_client -s node-2 -p 7473", "rdma_client: end 0"},
                {"rstream -p 7474 -S 65536 -C 20 -T v", "rstream -s node-2 -p 7474 -S 65536 -C 20 -T v", "custom"},
                {"timeout 60 udpong -b 0.0.0.0 -p 7475 -T b", "udpong -s node-2 -p 7475 -C 50 -S 1000 -T b", "custom"},
                // libfabric's verbs provider finds the device by binding the container's own interface address (eth0) through rdma_cm
                {"timeout 90 fi_pingpong -e rdm -p 'verbs;ofi_rxm' -B 7476 -I 20", "fi_pingpong -e rdm -p 'verbs;ofi_rxm' -P 7476 -I 20 node-2",
                    "=20"},
                {"timeout 90 fi_pingpong -e msg -p verbs -B 7477 -I 20", "fi_pingpong -e msg -p verbs -P 7477 -I 20 node-2", "=20"},
            };
            for (String[] program : programs) {
                Result client = pairInContainers(node1, node2, preload, program[0], program[1]);
                assertThat(client.output()).as(program[1] + ":\n" + client.output()).contains(program[2]);
            }
            // ... and Debian's UCX: it sees the device (the uverbs-devices service made its files) and runs
            // between the two containers. UCX registers tens of MiB up front, more than the testbed's 64 MiB
            // memlock limit pins; under PIN_ON_MISS a page is pinned only while the NIC's TLB holds it.
            Result ucxInfo = run(60, "docker", "exec", node1, "sh", "-c", preload + " ucx_info -d");
            assertThat(ucxInfo.output()).as("ucx_info -d in node-1's container:\n" + ucxInfo.output())
                    .contains("Memory domain: pagewire0", "Transport: rc_verbs", "Transport: ud_verbs", "Connection manager: rdmacm");
            Result fiInfo = run(60, "docker", "exec", node1, "sh", "-c", preload + " fi_info -p verbs");
            assertThat(fiInfo.output()).as("fi_info -p verbs in node-1's container:\n" + fiInfo.output())
                    .contains("provider: verbs;ofi_rxm", "domain: pagewire0", "type: FI_EP_RDM", "type: FI_EP_MSG");
            String ucx = preload + " UCX_TLS=rc_v UCX_NET_DEVICES=pagewire0:1 PAGEWIRE_VERBS_REGISTRATION=PIN_ON_MISS";
            Result ucxClient = pairInContainers(node1, node2, ucx, "timeout 60 ucx_perftest -p 13337",
                    "timeout 60 ucx_perftest -p 13337 node-2 -t tag_lat -n 100");
            assertThat(ucxClient.output()).contains("Final:").doesNotContain("ERROR", "pagewire-verbs error");

            // An experiment that runs stock verbs programs against the testbed: prefetch's ibv_rc_pingpong in the two containers,
            // its counts read from the nodes' meters through the SDK.
            VerbsPrograms.useLibraryOfThisBuild();
            StringWriter progress = new StringWriter();
            ExperimentResult prefetch = new PrefetchExperiment().run(new ExperimentSettings(1, true, new ExperimentSettings.RunningCluster(
                    "localhost:" + env.get("PAGEWIRE_HOST_PORT_NODE1"), "localhost:" + env.get("PAGEWIRE_HOST_PORT_NODE2"), app,
                    List.of(node1, node2))), new PrintWriter(progress));
            String table = ExperimentReport.table(prefetch);
            System.out.println(progress + table);
            assertThat(prefetch.claims()).as("prefetch against the testbed\n" + progress + table)
                    .filteredOn(c -> !c.statement().startsWith("so the first exchange is faster")).allMatch(Claim::reproduced);

            FirstProgram.Result first = FirstProgram.run("localhost:" + env.get("PAGEWIRE_HOST_PORT_NODE1"), "localhost:" + env.get("PAGEWIRE_HOST_PORT_NODE2"), app);
            assertThat(first.message()).isEqualTo("hello, pagewire");

            Result workload = compose(env, project, 180, "--profile", "workload", "run", "--rm", "workload");
            assertThat(workload.code()).as("the workload:\n" + workload.output()).isZero();
            assertThat(workload.output()).contains("write_bw").containsPattern("65536\\s+\\d+");

            String query = "http://localhost:" + env.get("PAGEWIRE_HOST_PORT_PROMETHEUS") + "/api/v1/query?query=count(up%7Bjob%3D%22pagewire%22%7D%3D%3D1)";
            HttpClient http = HttpClient.newHttpClient();
            String answer = "";
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline && !answer.contains("\"3\"")) {
                try {
                    answer = http.send(HttpRequest.newBuilder(URI.create(query)).build(), HttpResponse.BodyHandlers.ofString()).body();
                } catch (IOException e) {
                    answer = e.toString();
                }
                Thread.sleep(1000);
            }
            assertThat(answer).as("Prometheus sees three nodes up (it sends the testbed's metrics token)").contains("\"3\"");
            HttpResponse<String> stranger = http.send(HttpRequest.newBuilder(URI.create("http://localhost:" + env.get("PAGEWIRE_HOST_PORT_NODE1_METRICS")
                    + "/metrics")).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(stranger.statusCode()).as("node-1's /metrics to a scraper without the token: " + stranger.body()).isEqualTo(401);
        } finally {
            Result logs = compose(env, project, 60, "logs", "--tail", "20");
            Result down = compose(env, project, 120, "down", "-v", "--remove-orphans");
            System.out.println("compose logs (last lines):\n" + logs.output());
            assertThat(down.code()).as("compose down:\n" + down.output()).isZero();
            TestbedCertificates.deleteDirectory(certificates);
            TestbedCertificates.deleteDirectory(rings);
        }
    }


    private record Result(int code, String output) {
    }

    /**
     * Starts SERVER in node-2's container (in the background) and runs CLIENT in node-1's against it,
     * again every half second while the server is not listening yet (a refused client exits at once).
     */
    private static Result pairInContainers(String node1, String node2, String environment, String server, String client) throws Exception {
        Result started = run(10, "docker", "exec", "-d", node2, "sh", "-c", environment + " " + server);
        assertThat(started.code()).as("starting " + server + " in node-2's container:\n" + started.output()).isZero();
        Result run = null;
        for (int attempt = 0; attempt < 20 && (run == null || run.code() != 0); attempt++) {
            Thread.sleep(500); // the server opens its device and listens
            run = run(70, "docker", "exec", node1, "sh", "-c", environment + " " + client);
        }
        assertThat(run.code()).as(client + " in node-1's container against node-2's:\n" + run.output()).isZero();
        return run;
    }

    private static Result compose(Map<String, String> env, String project, int seconds, String... args) throws Exception {
        List<String> command = new ArrayList<>(hasComposePlugin() ? List.of("docker", "compose") : List.of("docker-compose"));
        command.addAll(List.of("-p", project, "-f", ROOT.resolve("docker-compose.yml").toString()));
        command.addAll(List.of(args));
        return run(seconds, env, command);
    }

    private static boolean hasComposePlugin() throws Exception {
        return run(30, "docker", "compose", "version").code() == 0;
    }

    private static Result run(int seconds, String... command) throws Exception {
        return run(seconds, Map.of(), List.of(command));
    }

    private static Result run(int seconds, Map<String, String> env, List<String> command) throws Exception {
        Path output = Files.createTempFile("pagewire-compose", ".log");
        try {
            ProcessBuilder builder = new ProcessBuilder(command).directory(ROOT.toFile()).redirectErrorStream(true).redirectOutput(output.toFile());
            builder.environment().putAll(env);
            Process process = builder.start();
            if (!process.waitFor(seconds, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                return new Result(-1, String.join(" ", command) + " did not finish in " + seconds + " s\n" + Files.readString(output, StandardCharsets.UTF_8));
            }
            return new Result(process.exitValue(), Files.readString(output, StandardCharsets.UTF_8));
        } finally {
            Files.deleteIfExists(output);
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }
}
