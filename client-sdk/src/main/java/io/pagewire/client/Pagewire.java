package io.pagewire.client;

import io.grpc.Channel;
import java.util.List;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.CompletableFuture;

/**
 * A connection to one Pagewire node: open endpoints on it, read what it is and what its counters
 * say. Start here: {@code try (Pagewire node = Pagewire.connect("localhost:7100")) { ... }}.
 */
public interface Pagewire extends AutoCloseable {
    /** Connects to a node at "host:port" with default options. */
    static Pagewire connect(String target) {
        return connect(target, ConnectOptions.defaults());
    }

    /** Connects to a node at "host:port". */
    static Pagewire connect(String target, ConnectOptions options) {
        return Provider.INSTALLED.connect(target, options);
    }

    /** Uses a channel the application manages (closing the connection leaves the channel open). */
    static Pagewire connect(Channel channel, ConnectOptions options) {
        return Provider.INSTALLED.over(channel, options);
    }

    /**
     * What makes connections: the SDK's implementation registers one with {@link ServiceLoader}, so that
     * this interface, like the rest of the API, names no implementation (as gRPC finds its transports).
     */
    interface Provider {
        /** A connection to a node at "host:port", over a channel the connection owns. */
        Pagewire connect(String target, ConnectOptions options);

        /** A connection over a channel the application owns. */
        Pagewire over(Channel channel, ConnectOptions options);

        /** The provider on the class path; the SDK's jar has one. */
        Provider INSTALLED = ServiceLoader.load(Provider.class, Provider.class.getClassLoader()).findFirst()
                .orElseThrow(() -> new IllegalStateException("no Pagewire connection provider on the class path: add the pagewire-client-sdk jar"));
    }

    NodeInfo node();

    /**
     * Opens an endpoint: a new process on the node, with its own address space. It lives until it is
     * closed or this application disconnects, and then releases everything it held.
     */
    Endpoint openEndpoint(String name);

    CompletableFuture<Endpoint> openEndpointAsync(String name);

    /** The node's meters now, by Prometheus name; each value is keyed by its tags (e.g. "mode=SHADOW"). */
    Map<String, Map<String, Double>> stats();

    /** The node's meters now, each with its name, tags, value and help. */
    List<Stat> statList();

    /** Every memory region registered on the node now, with its counters (`pagewire stat --regions`). */
    List<RegionStats> regionStats();

    /** Closes every endpoint opened through this connection, then the connection. */
    @Override
    void close();

    /** One meter of a node. */
    record Stat(String name, Map<String, String> tags, double value, String help, boolean counter) {
    }
}
