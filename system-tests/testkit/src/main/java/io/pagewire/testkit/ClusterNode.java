package io.pagewire.testkit;

import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;

/** One node of a test cluster as a test drives it: connect to it, read its metrics, stop, kill, restart it, cut its links. */
public interface ClusterNode {
    /** The node's id (node-1..node-N), which peers and queue-pair addresses use. */
    String id();

    /** Where the test's JVM reaches the node's verbs port, "host:port" (changes when a container restarts). */
    String target();

    /** Where the node's Prometheus endpoint answers from the test's JVM ("http://host:port/metrics"). */
    String metricsUrl();

    /** An SDK connection to the node with default options; the cluster closes it after the test. */
    default Pagewire connect() {
        return connect(ConnectOptions.defaults());
    }

    /** An SDK connection to the node; the cluster closes it after the test. */
    Pagewire connect(ConnectOptions options);

    /** Whether the node is running now. */
    boolean running();

    /** Stops the node as SIGTERM does: it stops taking work, drains what is in flight, then exits. */
    void stop();

    /** Kills the node at once, as SIGKILL or a power cut does: nothing drains. */
    void kill();

    /** Starts a stopped or killed node again with the same id and settings; returns once its links to every running peer are up. */
    void restart();

    /** Cuts the network between this node and a peer both ways (packets are dropped, as on a broken cable). */
    void cutLink(String peer);

    /** Heals a link that {@link #cutLink} cut. */
    void healLink(String peer);

    /** The node's recent log lines, or what it can say about itself: what a failing test prints. */
    String logs();
}
