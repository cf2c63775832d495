package io.pagewire.tools.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.reflection.v1.ServerReflectionGrpc;
import io.grpc.reflection.v1.ServerReflectionRequest;
import io.grpc.reflection.v1.ServerReflectionResponse;
import io.grpc.stub.StreamObserver;
import io.pagewire.client.Access;
import io.pagewire.client.Completion;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.security.SecurityContext;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What every node serves besides the fabric and verbs: /metrics, gRPC health and reflection, a graceful shutdown. */
class NodeServicesTest {
    @Test
    void metricsAreServedOverHttpInPrometheusFormat() throws Exception {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> c.metricsPort(0).kernel().physicalMemoryBytes(8 << 20).swapBytes(0))) {
            HttpResponse<String> response = HttpClient.newHttpClient().send(
                    HttpRequest.newBuilder(URI.create(cluster.node(2).metricsUrl())).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(response.statusCode()).isEqualTo(200);
            assertThat(response.headers().firstValue("Content-Type")).hasValue("text/plain; version=0.0.4; charset=utf-8");
            assertThat(response.body()).contains("# TYPE pagewire_tlb_hits_total counter",
                    "pagewire_link_lanes_up{node=\"node-2\",peer=\"node-1\",}");
        }
    }

    /**
     * With a metrics token (here from the file `pagewire certs` makes), /metrics answers 401 with a
     * clear reason to a scraper that sends no token or another one, and the meters to one that sends
     * it; the node's start line says a token is required.
     */
    @Test
    void aMetricsTokenKeepsStrangersOutOfTheMeters(@TempDir Path dir) throws Exception {
        Path token = TestbedCertificates.in(dir).metricsToken();
        String secret = Files.readString(token).trim();
        assertThat(secret).as("the token pagewire certs makes").matches("[0-9a-f]{64}");
        assertThat(TestbedCertificates.in(dir).metricsToken()).as("kept on a second run").hasContent(secret);
        try (EmbeddedCluster cluster = EmbeddedCluster.start(1, Transport.NETTY, c -> c.metricsPort(0).kernel().physicalMemoryBytes(8 << 20)
                .swapBytes(0))) {
            assertThat(cluster.node(1).metricsBoundAddress()).as("no token set").endsWith("(no token: anyone who reaches it may read it)");
        }
        try (EmbeddedCluster cluster = EmbeddedCluster.start(1, Transport.NETTY, c -> {
            c.metricsPort(0).kernel().physicalMemoryBytes(8 << 20).swapBytes(0);
            c.security().metricsTokenFile(token);
        })) {
            PagewireNode node = cluster.node(1);
            assertThat(node.metricsBoundAddress()).endsWith("(bearer token required)");
            HttpClient http = HttpClient.newHttpClient();
            HttpResponse<String> none = http.send(HttpRequest.newBuilder(URI.create(node.metricsUrl())).build(), HttpResponse.BodyHandlers.ofString());
            assertThat(none.statusCode()).isEqualTo(401);
            assertThat(none.headers().firstValue("WWW-Authenticate")).hasValueSatisfying(v -> assertThat(v).startsWith("Bearer"));
            assertThat(none.body()).contains("needs 'Authorization: Bearer <token>' (none was sent").doesNotContain("pagewire_");
            HttpResponse<String> wrong = http.send(HttpRequest.newBuilder(URI.create(node.metricsUrl())).header("Authorization", "Bearer " + secret + "x")
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertThat(wrong.statusCode()).isEqualTo(401);
            assertThat(wrong.body()).contains("the one sent is not it").doesNotContain(secret);
            HttpResponse<String> right = http.send(HttpRequest.newBuilder(URI.create(node.metricsUrl())).header("Authorization", "Bearer " + secret)
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertThat(right.statusCode()).isEqualTo(200);
            assertThat(right.body()).contains("# TYPE pagewire_tlb_hits_total counter");
        }
    }

    @Test
    void aMetricsTokenFileThatCannotBeReadIsAClearError(@TempDir Path dir) {
        Path missing = dir.resolve("metrics.token");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> new SecurityContext().metricsTokenFile(missing).conclude("n", true))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("pagewire.security.metricsTokenFile: cannot read " + missing);
    }

    @Test
    void healthAndReflectionAreServed() throws Exception {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(1, Transport.NETTY, c -> c.kernel().physicalMemoryBytes(8 << 20).swapBytes(0))) {
            ManagedChannel channel = cluster.openChannel(cluster.node(1));
            try {
                HealthGrpc.HealthBlockingStub health = HealthGrpc.newBlockingStub(channel);
                for (String service : List.of("", "pagewire.verbs.v1.Verbs", "pagewire.fabric.v1.Fabric")) {
                    assertThat(health.check(HealthCheckRequest.newBuilder().setService(service).build()).getStatus())
                            .as("health of '" + service + "'").isEqualTo(HealthCheckResponse.ServingStatus.SERVING);
                }
                List<String> services = new ArrayList<>();
                CountDownLatch done = new CountDownLatch(1);
                StreamObserver<ServerReflectionRequest> requests = ServerReflectionGrpc.newStub(channel).serverReflectionInfo(
                        new StreamObserver<>() {
                            @Override
                            public void onNext(ServerReflectionResponse r) {
                                r.getListServicesResponse().getServiceList().forEach(s -> services.add(s.getName()));
                            }

                            @Override
                            public void onError(Throwable t) {
                                done.countDown();
                            }

                            @Override
                            public void onCompleted() {
                                done.countDown();
                            }
                        });
                requests.onNext(ServerReflectionRequest.newBuilder().setListServices("").build());
                requests.onCompleted();
                assertThat(done.await(10, TimeUnit.SECONDS)).isTrue();
                assertThat(services).contains("pagewire.verbs.v1.Verbs", "pagewire.fabric.v1.Fabric", "grpc.health.v1.Health");
            } finally {
                channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void aGracefulShutdownStopsServingAndLetsInFlightWorkFinish() throws Exception {
        try (EmbeddedCluster cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> c.kernel().physicalMemoryBytes(64L << 20).swapBytes(0))) {
            PagewireNode node = cluster.node(1);
            ManagedChannel channel = cluster.openChannel(node);
            try (Pagewire a = Pagewire.connect(node.target(), cluster.connectOptions());
                    Pagewire b = Pagewire.connect(cluster.node(2).target(), cluster.connectOptions())) {
                Endpoint sender = a.openEndpoint("sender");
                Endpoint receiver = b.openEndpoint("receiver");
                int length = 8 << 20;
                long src = sender.allocate(length);
                long dst = receiver.allocate(length);
                MemoryRegion local = sender.register(src, length, RegistrationMode.PINNED, Access.all());
                MemoryRegion remote = receiver.register(dst, length, RegistrationMode.ON_DEMAND, Access.all());
                QueuePair qp = sender.connect(receiver);
                List<CompletableFuture<Completion>> inFlight = new ArrayList<>();
                for (int i = 0; i < 8; i++) {
                    inFlight.add(qp.write(local, src, length, dst, remote.rkey()));
                }
                HealthGrpc.HealthBlockingStub health = HealthGrpc.newBlockingStub(channel);
                assertThat(health.check(HealthCheckRequest.getDefaultInstance()).getStatus()).isEqualTo(HealthCheckResponse.ServingStatus.SERVING);
                CompletableFuture<Boolean> drained = CompletableFuture.supplyAsync(node::shutdownGracefully);
                assertThat(drained.get(60, TimeUnit.SECONDS)).as("in-flight work drained within the grace period").isTrue();
                for (CompletableFuture<Completion> write : inFlight) {
                    assertThat(write).as("every write posted before the shutdown completed").isCompletedWithValueMatching(c -> c.bytes() == length);
                }
            } finally {
                channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
            }
        }
    }

    @Test
    void sigtermStopsANodeProcessGracefully(@TempDir Path certs) throws Exception {
        assertThat(PagewireCommand.run(Map.of(), "certs", "--out", certs.toString(), "sigterm")).isZero();
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Process node = new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), PagewireCommand.class.getName(), "node",
                "--id", "sigterm", "--host", "127.0.0.1", "--port", "0", "--metrics-port", "-1", "--memory", "16MiB", "--swap", "0",
                "--set", "pagewire.security.certificateDirectory=" + certs)
                .redirectErrorStream(true).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(node.getInputStream(), StandardCharsets.UTF_8))) {
            String first = out.readLine();
            assertThat(first).startsWith("node sigterm listening on ").contains("mutual TLS as " + certs.resolve("sigterm.pem"));
            node.toHandle().destroy(); // SIGTERM, leaving the output open to read
            List<String> rest = new ArrayList<>();
            String line;
            while ((line = out.readLine()) != null) {
                rest.add(line);
            }
            assertThat(node.waitFor(30, TimeUnit.SECONDS)).isTrue();
            assertThat(rest).contains("node sigterm: shutting down (health NOT_SERVING, draining in-flight work)", "node sigterm: stopped");
        } finally {
            node.destroyForcibly();
        }
    }
}
