package io.pagewire.tools.experiment;

import io.pagewire.client.ClientSecurity;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.node.Transport;
import java.util.Optional;

/**
 * Two applications' connections to two nodes, the first sending and the second receiving: to a
 * pair of nodes started in this JVM (over loopback gRPC, plaintext), or to two nodes of a running
 * cluster. Closing it closes the connections, and the nodes when it started them.
 */
final class ApplicationPair implements AutoCloseable {
    private final EmbeddedCluster embedded;
    private final Pagewire requester;
    private final Pagewire responder;

    private ApplicationPair(EmbeddedCluster embedded, Pagewire requester, Pagewire responder) {
        this.embedded = embedded;
        this.requester = requester;
        this.responder = responder;
    }

    /** Connects to the settings' running cluster, or starts two nodes to connect to. */
    static ApplicationPair open(ExperimentSettings settings) {
        ExperimentSettings.RunningCluster running = settings.cluster();
        if (running != null) {
            Pagewire a = Pagewire.connect(running.requester(), running.options());
            try {
                return new ApplicationPair(null, a, Pagewire.connect(running.responder(), running.options()));
            } catch (RuntimeException e) {
                a.close();
                throw e;
            }
        }
        return over(EmbeddedCluster.start(2, Transport.NETTY, c -> c.security().plaintext()));
    }

    /** Connects to the first two nodes of {@code cluster}, which must take plaintext, and closes it when closed. */
    static ApplicationPair over(EmbeddedCluster cluster) {
        ConnectOptions plaintext = ConnectOptions.defaults().withSecurity(ClientSecurity.plaintext());
        try {
            Pagewire a = Pagewire.connect(cluster.node(1).target(), plaintext);
            return new ApplicationPair(cluster, a, Pagewire.connect(cluster.node(2).target(), plaintext));
        } catch (RuntimeException e) {
            cluster.close();
            throw e;
        }
    }

    Pagewire requester() {
        return requester;
    }

    Pagewire responder() {
        return responder;
    }

    /** The nodes, when this JVM runs them (their internals are then there to measure). */
    Optional<EmbeddedCluster> embedded() {
        return Optional.ofNullable(embedded);
    }

    /** Where the applications run, for a progress line. */
    String where() {
        return embedded == null ? "against " + requester.node().nodeId() + " and " + responder.node().nodeId() + " of a running cluster"
                : "on two nodes in this JVM";
    }

    @Override
    public void close() {
        try {
            requester.close();
            responder.close();
        } finally {
            if (embedded != null) {
                embedded.close();
            }
        }
    }
}
