package io.pagewire.node.metrics;

import com.sun.net.httpserver.HttpServer;
import io.micrometer.prometheus.PrometheusMeterRegistry;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/** The node's Prometheus endpoint: GET /metrics returns the registry in the text exposition format. */
@SuppressWarnings("deprecation") // the simpleclient registry, as PagewireNode explains
public final class MetricsEndpoint implements AutoCloseable {
    private final HttpServer server;
    private final String host;
    private final ExecutorService executor;
    private final boolean tokenRequired;

    private MetricsEndpoint(HttpServer server, String host, ExecutorService executor, boolean tokenRequired) {
        this.server = server;
        this.host = host;
        this.executor = executor;
        this.tokenRequired = tokenRequired;
    }

    /**
     * Serves {@code registry} at {@code http://host:port/metrics}; when {@code token} is not empty,
     * only to a scraper that sends {@code Authorization: Bearer TOKEN} (Prometheus' {@code authorization}
     * setting), and 401 to anyone else.
     */
    public static MetricsEndpoint start(String host, int port, PrometheusMeterRegistry registry, String token) {
        byte[] expected = ("Bearer " + token).getBytes(StandardCharsets.US_ASCII);
        try {
            HttpServer server = HttpServer.create(new InetSocketAddress(host, port), 16);
            server.createContext("/metrics", exchange -> {
                String given = exchange.getRequestHeaders().getFirst("Authorization");
                boolean allowed = token.isEmpty()
                        || given != null && MessageDigest.isEqual(expected, given.trim().getBytes(StandardCharsets.US_ASCII));
                byte[] body = allowed ? registry.scrape().getBytes(StandardCharsets.UTF_8)
                        : ("this node's /metrics needs 'Authorization: Bearer <token>' (" + (given == null ? "none was sent" : "the one sent is not it")
                                + "; the token is the node's pagewire.security.metricsToken)\n").getBytes(StandardCharsets.UTF_8);
                exchange.getResponseHeaders().set("Content-Type", allowed ? "text/plain; version=0.0.4; charset=utf-8" : "text/plain; charset=utf-8");
                if (!allowed) {
                    exchange.getResponseHeaders().set("WWW-Authenticate", "Bearer realm=\"pagewire metrics\"");
                }
                exchange.sendResponseHeaders(allowed ? 200 : 401, body.length);
                try (OutputStream out = exchange.getResponseBody()) {
                    out.write(body);
                }
            });
            ExecutorService executor = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "pagewire-metrics-" + port);
                t.setDaemon(true);
                return t;
            });
            server.setExecutor(executor);
            server.start();
            return new MetricsEndpoint(server, host.equals("0.0.0.0") ? "127.0.0.1" : host, executor, !token.isEmpty());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Where the endpoint is bound and whether it asks for a token, as the log should say it:
     * {@code http://0.0.0.0:9464/metrics (all interfaces, no token: anyone may read it)}.
     */
    public String boundAddress() {
        String bound = server.getAddress().getAddress().isAnyLocalAddress() ? "0.0.0.0" : host;
        return "http://" + bound + ":" + server.getAddress().getPort() + "/metrics (" + (bound.equals("0.0.0.0") ? "all interfaces, " : "")
                + (tokenRequired ? "bearer token required" : "no token: anyone who reaches it may read it") + ")";
    }

    public String url() {
        return "http://" + host + ":" + server.getAddress().getPort() + "/metrics";
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
