package io.pagewire.systemtests;

import io.pagewire.tools.testbed.EmbeddedCluster;

import java.util.function.Supplier;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;

/**
 * Prints every node's counters and queue-pair state when a cluster test fails; it runs before
 * {@code @AfterEach} closes the cluster, so the state is still there to print.
 */
public final class PrintClusterOnFailure implements TestExecutionExceptionHandler {
    private final Supplier<EmbeddedCluster> cluster;

    public PrintClusterOnFailure(Supplier<EmbeddedCluster> cluster) {
        this.cluster = cluster;
    }

    @Override
    public void handleTestExecutionException(ExtensionContext context, Throwable cause) throws Throwable {
        EmbeddedCluster current = cluster.get();
        if (current != null) {
            System.err.println("Cluster state after " + context.getDisplayName() + " failed:\n" + current.describe());
        }
        throw cause;
    }
}
