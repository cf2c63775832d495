package io.pagewire.systemtests.metrics;

import io.pagewire.config.Meter;
import io.pagewire.node.metrics.NodeMetrics;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import io.pagewire.client.Access;
import io.pagewire.client.Endpoint;
import io.pagewire.client.EventCounter;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.PagewireException;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The Grafana dashboards in deploy/grafana, checked for structure and run against a real Prometheus
 * (Debian's package, installed by deploy/prometheus/ensure-prometheus.sh when missing) that scrapes
 * an embedded cluster under a workload: every panel's every query must succeed and return series.
 */
class DashboardsTest {
    private static final String DATASOURCE_UID = "pagewire-prometheus";
    private static final Pattern METRIC_NAME = Pattern.compile("\\b((?:pagewire|grpc)_[a-z_]+)\\b");
    private static final Pattern VARIABLE = Pattern.compile("\\$(\\w+)");

    private static Path repository() {
        Path dir = Path.of("").toAbsolutePath();
        while (dir != null && !Files.isDirectory(dir.resolve("deploy/grafana"))) {
            dir = dir.getParent();
        }
        assertThat(dir).as("the repository root (with deploy/grafana) above " + Path.of("").toAbsolutePath()).isNotNull();
        return dir;
    }

    private static List<Path> dashboards() throws IOException {
        try (Stream<Path> files = Files.list(repository().resolve("deploy/grafana/dashboards"))) {
            return files.filter(p -> p.toString().endsWith(".json")).sorted().toList();
        }
    }

    private static JsonObject read(Path file) throws IOException {
        return JsonParser.parseString(Files.readString(file)).getAsJsonObject();
    }

    /** Every panel, rows' nested panels included. */
    private static List<JsonObject> panels(JsonObject dashboard) {
        List<JsonObject> out = new ArrayList<>();
        for (JsonElement p : dashboard.getAsJsonArray("panels")) {
            out.add(p.getAsJsonObject());
            if (p.getAsJsonObject().has("panels")) {
                p.getAsJsonObject().getAsJsonArray("panels").forEach(n -> out.add(n.getAsJsonObject()));
            }
        }
        return out;
    }

    private static List<String> variableNames(JsonObject dashboard) {
        List<String> names = new ArrayList<>();
        dashboard.getAsJsonObject("templating").getAsJsonArray("list").forEach(v -> names.add(v.getAsJsonObject().get("name").getAsString()));
        return names;
    }

    @Test
    void dashboardsAreWellFormed() throws IOException {
        String provisioned = Files.readString(repository().resolve("deploy/grafana/provisioning/datasources/pagewire.yml"));
        assertThat(provisioned).contains("uid: " + DATASOURCE_UID);
        List<Path> files = dashboards();
        assertThat(files).extracting(p -> p.getFileName().toString()).contains("pagewire-cluster.json", "pagewire-node.json");
        Set<String> uids = new HashSet<>();
        for (Path file : files) {
            JsonObject dashboard = read(file);
            String uid = dashboard.get("uid").getAsString();
            assertThat(uid).as(file + " uid").matches("[a-z0-9-]{1,40}");
            assertThat(uids.add(uid)).as(file + " uid is unique").isTrue();
            assertThat(dashboard.get("title").getAsString()).isNotBlank();
            List<String> variables = variableNames(dashboard);
            for (JsonElement v : dashboard.getAsJsonObject("templating").getAsJsonArray("list")) {
                assertThat(v.getAsJsonObject().getAsJsonObject("datasource").get("uid").getAsString()).as(file + " variable datasource")
                        .isEqualTo(DATASOURCE_UID);
            }
            Set<Integer> ids = new HashSet<>();
            for (JsonObject panel : panels(dashboard)) {
                String where = file.getFileName() + " panel '" + panel.get("title").getAsString() + "'";
                assertThat(ids.add(panel.get("id").getAsInt())).as(where + " id is unique").isTrue();
                assertThat(panel.getAsJsonObject("datasource").get("uid").getAsString()).as(where + " datasource").isEqualTo(DATASOURCE_UID);
                JsonArray targets = panel.getAsJsonArray("targets");
                assertThat(targets).as(where + " has queries").isNotEmpty();
                for (JsonElement t : targets) {
                    JsonObject target = t.getAsJsonObject();
                    assertThat(target.getAsJsonObject("datasource").get("uid").getAsString()).as(where + " query datasource").isEqualTo(DATASOURCE_UID);
                    Matcher m = VARIABLE.matcher(target.get("expr").getAsString());
                    while (m.find()) {
                        assertThat(m.group(1).startsWith("__") || variables.contains(m.group(1)))
                                .as(where + " uses $" + m.group(1) + ", which the dashboard declares").isTrue();
                    }
                }
            }
        }
        assertThat(variableNames(read(repository().resolve("deploy/grafana/dashboards/pagewire-node.json")))).contains("node");
    }

    @Test
    void dashboardsQueryOnlyMetersPagewireDefines() throws IOException {
        Set<String> defined = new HashSet<>();
        for (Meter meter : NodeMetrics.meters()) {
            defined.add(meter.prometheusName());
        }
        Set<String> grpc = Set.of("grpc_server_requests_received_messages_total", "grpc_server_responses_sent_messages_total",
                "grpc_server_processing_duration_seconds");
        for (Path file : dashboards()) {
            for (JsonObject panel : panels(read(file))) {
                for (JsonElement t : panel.getAsJsonArray("targets")) {
                    Matcher m = METRIC_NAME.matcher(t.getAsJsonObject().get("expr").getAsString());
                    while (m.find()) {
                        String name = m.group(1).replaceAll("_(bucket|count|sum)$", "");
                        assertThat(defined.contains(name) || grpc.contains(name))
                                .as(file.getFileName() + " panel '" + panel.get("title").getAsString() + "' queries " + m.group(1)
                                        + ", which no Metric defines").isTrue();
                    }
                }
            }
        }
    }

    @Test
    void everyDefinedMeterIsExported() {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> c.metricsPort(0).kernel().physicalMemoryBytes(8 << 20).swapBytes(0))) {
            String scrape = cluster.node(1).registry().scrape();
            for (Meter meter : NodeMetrics.meters()) {
                String exported = meter.kind() == Meter.Kind.TIMER ? meter.prometheusName() + "_bucket" : meter.prometheusName();
                assertThat(scrape).as(meter.name() + " is exported as " + exported).contains(exported + "{");
                assertThat(scrape).as(meter.name() + " has its help text").contains("# HELP " + meter.prometheusName() + " " + meter.help());
            }
            assertThat(scrape).contains("node=\"node-1\"");
        }
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void everyPanelQueryReturnsSeriesFromARealPrometheus(@TempDir Path dir) throws Exception {
        String prometheus = ensurePrometheus();
        try (EmbeddedCluster cluster = EmbeddedCluster.start(3, Transport.NETTY, c -> {
            c.metricsPort(0);
            c.kernel().physicalMemoryBytes(4L << 20).swapBytes(64L << 20).memlockLimitBytes(1L << 20);
            c.nic().tlbEntries(64).tlbWays(4).ackTimeoutNs(20_000_000L);
            c.fabric().lossRate(0.01);
        })) {
            int port = freePort();
            Path config = dir.resolve("prometheus.yml");
            StringBuilder targets = new StringBuilder();
            for (PagewireNode node : cluster.nodes()) {
                targets.append(targets.length() == 0 ? "" : ", ").append('"')
                        .append(node.metricsUrl().replace("http://", "").replace("/metrics", "")).append('"');
            }
            Files.writeString(config, "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: pagewire\n    static_configs:\n"
                    + "      - targets: [" + targets + "]\n");
            Process server = new ProcessBuilder(prometheus, "--config.file=" + config, "--storage.tsdb.path=" + dir.resolve("data"),
                    "--web.listen-address=127.0.0.1:" + port, "--log.level=warn")
                    .redirectErrorStream(true).redirectOutput(dir.resolve("prometheus.log").toFile()).start();
            AtomicBoolean running = new AtomicBoolean(true);
            Thread workload = new Thread(() -> workload(cluster, running), "dashboard-workload");
            try {
                HttpClient http = HttpClient.newHttpClient();
                String base = "http://127.0.0.1:" + port;
                awaitReady(http, base, server, dir.resolve("prometheus.log"));
                workload.start();
                awaitSeries(http, base, "count(up{job=\"pagewire\"} == 1) == 3", Duration.ofSeconds(60));
                // A few more scrapes while the workload runs, so that every rate() has samples.
                Thread.sleep(8_000);
                List<String> failures = new ArrayList<>();
                int queries = 0;
                for (Path file : dashboards()) {
                    JsonObject dashboard = read(file);
                    Map<String, String> values = new TreeMap<>();
                    for (JsonElement v : dashboard.getAsJsonObject("templating").getAsJsonArray("list")) {
                        String definition = v.getAsJsonObject().get("definition").getAsString();
                        List<String> options = labelValues(http, base, definition);
                        queries++;
                        if (options.isEmpty()) {
                            failures.add(file.getFileName() + " variable " + v.getAsJsonObject().get("name").getAsString() + ": "
                                    + definition + " has no values");
                        } else {
                            values.put(v.getAsJsonObject().get("name").getAsString(), options.get(0));
                        }
                    }
                    for (JsonObject panel : panels(dashboard)) {
                        for (JsonElement t : panel.getAsJsonArray("targets")) {
                            String expr = substitute(t.getAsJsonObject().get("expr").getAsString(), values);
                            queries++;
                            String problem = query(http, base, expr);
                            if (problem != null) {
                                failures.add(file.getFileName() + " panel '" + panel.get("title").getAsString() + "': " + expr + " -> " + problem);
                            }
                        }
                    }
                }
                assertThat(failures).as("of " + queries + " dashboard queries, these failed").isEmpty();
                assertThat(queries).isGreaterThan(40);
            } finally {
                running.set(false);
                workload.join(30_000);
                server.destroy();
                if (!server.waitFor(10, TimeUnit.SECONDS)) {
                    server.destroyForcibly();
                }
            }
        }
    }

    /** Traffic that moves every meter: writes in every mode under memory pressure, reads, atomics, a refused request. */
    private static void workload(EmbeddedCluster cluster, AtomicBoolean running) {
        List<Pagewire> connections = new ArrayList<>();
        try {
            for (PagewireNode node : cluster.nodes()) {
                connections.add(Pagewire.connect(node.target(), cluster.connectOptions()));
            }
            int round = 0;
            while (running.get()) {
                RegistrationMode mode = RegistrationMode.values()[round++ % RegistrationMode.values().length];
                Endpoint a = connections.get(round % 3).openEndpoint("dashboards-a");
                Endpoint b = connections.get((round + 1) % 3).openEndpoint("dashboards-b");
                try {
                    int length = mode == RegistrationMode.PINNED ? 256 << 10 : 8 << 20;
                    long src = a.allocate(64 << 10);
                    a.store(src, new byte[64 << 10]);
                    MemoryRegion local = a.register(src, 64 << 10, mode, Access.all());
                    long dst = b.allocate(length);
                    MemoryRegion remote = b.register(dst, length, mode, Access.all());
                    EventCounter counter = b.createEventCounter(EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_ATOMIC));
                    QueuePair qp = a.connect(b);
                    for (long at = 0; at + (64 << 10) <= length && running.get(); at += 64 << 10) {
                        qp.await(qp.writeWithNotify(local, src, 64 << 10, dst + at, remote.rkey(), counter.id()));
                    }
                    qp.await(qp.read(local, src, 64 << 10, dst, remote.rkey()));
                    qp.await(qp.fetchAdd(counter.id(), 1));
                    try {
                        qp.await(qp.write(local, src, 8, dst, 0x1f2eL));
                    } catch (PagewireException expected) {
                        // A completion error, for the error panels.
                    }
                } catch (PagewireException e) {
                    // Keep the workload going; the assertions are about the dashboards.
                } finally {
                    a.close();
                    b.close();
                }
            }
        } finally {
            connections.forEach(Pagewire::close);
        }
    }

    private static String substitute(String expr, Map<String, String> values) {
        String out = expr.replace("$__rate_interval", "30s").replace("$__interval", "5s").replace("$__range", "5m");
        for (Map.Entry<String, String> v : values.entrySet()) {
            out = out.replace("$" + v.getKey(), v.getValue());
        }
        return out;
    }

    /** Null when the query succeeded with at least one series; else what went wrong. */
    private static String query(HttpClient http, String base, String expr) throws Exception {
        JsonObject reply = get(http, base + "/api/v1/query?query=" + URLEncoder.encode(expr, StandardCharsets.UTF_8));
        if (!"success".equals(reply.get("status").getAsString())) {
            return "error: " + reply.get("error");
        }
        JsonArray result = reply.getAsJsonObject("data").getAsJsonArray("result");
        return result.isEmpty() ? "no series" : null;
    }

    private static List<String> labelValues(HttpClient http, String base, String definition) throws Exception {
        Matcher m = Pattern.compile("label_values\\((\\w+),\\s*(\\w+)\\)").matcher(definition);
        assertThat(m.matches()).as("variable definition " + definition).isTrue();
        JsonObject reply = get(http, base + "/api/v1/label/" + m.group(2) + "/values?match[]=" + URLEncoder.encode(m.group(1), StandardCharsets.UTF_8));
        List<String> values = new ArrayList<>();
        reply.getAsJsonArray("data").forEach(v -> values.add(v.getAsString()));
        return values;
    }

    private static JsonObject get(HttpClient http, String url) throws Exception {
        HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10)).build(),
                HttpResponse.BodyHandlers.ofString());
        return JsonParser.parseString(response.body()).getAsJsonObject();
    }

    private static void awaitReady(HttpClient http, String base, Process server, Path log) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (System.nanoTime() < deadline) {
            if (!server.isAlive()) {
                throw new AssertionError("prometheus exited with " + server.exitValue() + ":\n" + Files.readString(log));
            }
            try {
                if (http.send(HttpRequest.newBuilder(URI.create(base + "/-/ready")).build(), HttpResponse.BodyHandlers.discarding()).statusCode() == 200) {
                    return;
                }
            } catch (IOException notYet) {
                // still starting
            }
            Thread.sleep(200);
        }
        throw new AssertionError("prometheus was not ready within 60 s:\n" + Files.readString(log));
    }

    private static void awaitSeries(HttpClient http, String base, String expr, Duration timeout) throws Exception {
        long deadline = System.nanoTime() + timeout.toNanos();
        String problem = null;
        while (System.nanoTime() < deadline) {
            problem = query(http, base, expr);
            if (problem == null) {
                return;
            }
            Thread.sleep(500);
        }
        throw new AssertionError("'" + expr + "' never held: " + problem);
    }

    /** The path of a Prometheus binary, installed by the project's script if the machine has none. */
    private static String ensurePrometheus() throws Exception {
        Path script = repository().resolve("deploy/prometheus/ensure-prometheus.sh");
        Process install = new ProcessBuilder("bash", script.toString()).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String out = new String(install.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        assertThat(install.waitFor(600, TimeUnit.SECONDS)).as("the install script finished").isTrue();
        assertThat(install.exitValue()).as(script + " could not provide prometheus (see its output above)").isZero();
        String[] lines = out.split("\n");
        return lines[lines.length - 1].trim();
    }

    private static int freePort() throws IOException {
        try (ServerSocket socket = new ServerSocket(0)) {
            return socket.getLocalPort();
        }
    }
}
