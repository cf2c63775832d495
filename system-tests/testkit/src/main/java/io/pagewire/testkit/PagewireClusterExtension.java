package io.pagewire.testkit;

import java.time.Duration;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.jupiter.api.extension.TestExecutionExceptionHandler;

/**
 * A JUnit 5 extension that gives tests a {@link PagewireCluster}. Registered on a static field, one
 * cluster serves the whole class; on an instance field, each test gets its own:
 * <pre>{@code
 * @RegisterExtension
 * static final PagewireClusterExtension pagewire = new PagewireClusterExtension(ClusterSpec.nodes(3));
 *
 * @Test
 * void aWriteLands(PagewireCluster cluster) {
 *     Endpoint a = cluster.node(1).connect().openEndpoint("a");
 *     ...
 * }
 * }</pre>
 * A test of a per-test cluster may add settings of its own with {@link WithSettings}.
 * After each test it closes the SDK connections the test opened and checks that every node released
 * every session, frame and pin; when a test fails it prints every node's counters (and, for
 * containers, their logs). Where the nodes run is {@code -Dpagewire.testkit.backend=embedded|containers}
 * unless the spec says.
 */
public final class PagewireClusterExtension implements BeforeAllCallback, AfterAllCallback, BeforeEachCallback, AfterEachCallback,
        ParameterResolver, TestExecutionExceptionHandler {
    private final ClusterSpec spec;
    private Duration releaseTimeout = Duration.ofSeconds(20);
    private boolean perClass;
    private PagewireCluster cluster;

    public PagewireClusterExtension(ClusterSpec spec) {
        this.spec = spec;
    }

    /** How long, after each test, nodes may take to release what the test's applications held (default 20 s). */
    public PagewireClusterExtension releaseTimeout(Duration value) {
        releaseTimeout = value;
        return this;
    }

    /** The cluster of the running test. */
    public PagewireCluster cluster() {
        if (cluster == null) {
            throw new IllegalStateException("no Pagewire cluster is running: register the extension with @RegisterExtension");
        }
        return cluster;
    }

    @Override
    public void beforeAll(ExtensionContext context) {
        perClass = true;
        cluster = PagewireCluster.start(spec);
    }

    @Override
    public void afterAll(ExtensionContext context) {
        stop();
    }

    @Override
    public void beforeEach(ExtensionContext context) {
        WithSettings settings = context.getTestMethod().map(m -> m.getAnnotation(WithSettings.class)).orElse(null);
        if (perClass) {
            if (settings != null) {
                throw new IllegalStateException(context.getDisplayName() + ": @WithSettings needs a cluster per test; register the "
                        + "extension on an instance field, not a static one");
            }
            return;
        }
        cluster = PagewireCluster.start(settings == null ? spec : spec.with(settings.value()));
    }

    @Override
    public void afterEach(ExtensionContext context) {
        if (cluster == null) {
            return;
        }
        try {
            cluster.closeConnections();
            if (context.getExecutionException().isEmpty()) {
                cluster.awaitReleased(releaseTimeout);
            }
        } finally {
            if (!perClass) {
                stop();
            }
        }
    }

    private void stop() {
        PagewireCluster current = cluster;
        cluster = null;
        if (current != null) {
            current.close();
        }
    }

    @Override
    public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
        return parameter.getParameter().getType() == PagewireCluster.class;
    }

    @Override
    public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
        return cluster();
    }

    @Override
    public void handleTestExecutionException(ExtensionContext context, Throwable cause) throws Throwable {
        if (cluster != null) {
            System.err.println("Cluster state after " + context.getDisplayName() + " failed:\n" + cluster.describe());
        }
        throw cause;
    }
}
