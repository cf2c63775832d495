package io.pagewire.systemtests;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonParser;
import io.pagewire.testkit.ClusterBackend;
import io.pagewire.testkit.ClusterSpec;
import io.pagewire.testkit.PagewireCluster;
import io.pagewire.testkit.PagewireClusterExtension;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.images.builder.Transferable;
import org.testcontainers.utility.DockerImageName;

/**
 * A Prometheus in its own container on the nodes' network scrapes every node container by name, as
 * the compose testbed's does: every target is up and every node's meters arrive tagged with its id.
 */
class PrometheusScrapeContainerIT {
    /** The Prometheus image; deploy/base-image/build-base-images.sh builds the default from Debian's package. */
    static final String PROMETHEUS_IMAGE = System.getProperty("pagewire.prometheus.image", "pagewire/prometheus:bookworm");

    @RegisterExtension
    static final PagewireClusterExtension PAGEWIRE = new PagewireClusterExtension(ClusterSpec.nodes(3).backend(ClusterBackend.CONTAINERS));

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aContainerizedPrometheusScrapesEveryNode(PagewireCluster cluster) throws Exception {
        String config = """
                global:
                  scrape_interval: 1s
                scrape_configs:
                  - job_name: pagewire
                    static_configs:
                      - targets: ["node-1:9464", "node-2:9464", "node-3:9464"]
                """;
        try (GenericContainer<?> prometheus = new GenericContainer<>(DockerImageName.parse(PROMETHEUS_IMAGE))
                .withNetwork(cluster.network().orElseThrow())
                .withCopyToContainer(Transferable.of(config), "/etc/pagewire/prometheus.yml")
                .withCreateContainerCmdModifier(cmd -> cmd.withEntrypoint("prometheus"))
                .withCommand("--config.file=/etc/pagewire/prometheus.yml", "--storage.tsdb.path=/prometheus",
                        "--web.listen-address=0.0.0.0:9090")
                .withExposedPorts(9090)
                .waitingFor(Wait.forHttp("/-/ready").forStatusCode(200).withStartupTimeout(Duration.ofSeconds(60)))) {
            prometheus.start();
            String api = "http://" + prometheus.getHost() + ":" + prometheus.getMappedPort(9090) + "/api/v1/query?query=";
            HttpClient http = HttpClient.newHttpClient();
            Set<String> up = new TreeSet<>();
            Set<String> reporting = new TreeSet<>();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (System.nanoTime() < deadline && (up.size() < 3 || reporting.size() < 3)) {
                up = labels(http, api + encode("up{job=\"pagewire\"} == 1"), "instance");
                reporting = labels(http, api + encode("pagewire_memory_pages{state=\"free\"}"), "node");
                Thread.sleep(500);
            }
            assertThat(up).as("scrape targets up").containsExactly("node-1:9464", "node-2:9464", "node-3:9464");
            assertThat(reporting).as("nodes whose meters Prometheus has").containsExactly("node-1", "node-2", "node-3");
            // What the node's log says matches what Prometheus just reached: every interface, not loopback.
            assertThat(cluster.node(1).logs()).contains("listening on 0.0.0.0:7100 (all interfaces); metrics at http://0.0.0.0:9464/metrics (all interfaces, no token");
        }
    }

    private static String encode(String query) {
        return URLEncoder.encode(query, StandardCharsets.UTF_8);
    }

    /** The values of one label over the series a query returns. */
    private static Set<String> labels(HttpClient http, String url, String label) throws Exception {
        HttpResponse<String> response = http.send(HttpRequest.newBuilder(URI.create(url)).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(response.statusCode()).as(response.body()).isEqualTo(200);
        JsonArray result = JsonParser.parseString(response.body()).getAsJsonObject().getAsJsonObject("data").getAsJsonArray("result");
        Set<String> values = new TreeSet<>();
        for (JsonElement series : result) {
            JsonElement value = series.getAsJsonObject().getAsJsonObject("metric").get(label);
            if (value != null) {
                values.add(value.getAsString());
            }
        }
        return values;
    }
}
