package io.pagewire.node;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.prometheus.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;

/** The node's Prometheus endpoint: GET /metrics returns the registry in the text exposition format. */
@SuppressWarnings("deprecation") // the simpleclient registry, as PagewireNode explains
final class MetricsEndpoint implements AutoCloseable {
    private final HttpServer server;
    private final String host;
    private final java.util.concurrent.ExecutorService executor;

    private MetricsEndpoint(HttpServer server, String host, java.util.concurrent.ExecutorService executor) {
        this.server = server;
        this.host = host;
        this.executor = executor;
    }

    static MetricsEndpoint start(String host, int port, PrometheusMeterRegistry registry) {
        try {
            HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 16);
            server.createContext("/metrics", exchange -> {
                byte[] body = registry.scrape().getBytes(StandardCharsets.UTF_8);
                exchange.getResponseHeaders().set("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
                exchange.sendResponseHeaders(200, body.length);
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(body);
                }
            });
            java.util.concurrent.ExecutorService executor = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "pagewire-metrics-" + port);
                t.setDaemon(true);
                return t;
            });
            server.setExecutor(executor);
            server.start();
            return new MetricsEndpoint(server, host.equals("0.0.0.0") ? "127.0.0.1" : host, executor);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Where the endpoint is bound, as the log should say it: {@code http://0.0.0.0:9464/metrics (all interfaces)}. */
    String boundAddress() {
        String bound = server.getAddress().getAddress().isAnyLocalAddress() ? "0.0.0.0" : host;
        return "http://" + bound + ":" + server.getAddress().getPort() + "/metrics" + (bound.equals("0.0.0.0") ? " (all interfaces)" : "");
    }

    String url() {
        return "http://" + host + ":" + server.getAddress().getPort() + "/metrics";
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
