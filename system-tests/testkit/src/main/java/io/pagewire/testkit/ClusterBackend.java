package io.pagewire.testkit;

import java.util.Arrays;
import java.util.Locale;

/** Where a test cluster's nodes run: in the test's JVM (over gRPC's in-process transport or on loopback), or each in its own container. */
public enum ClusterBackend {
    /** Nodes in the test's JVM over gRPC's in-process transport: no sockets, no TLS; the quickest. */
    IN_PROCESS,
    /** Nodes in the test's JVM on loopback, over real HTTP/2 and mutual TLS as between containers: no Docker needed. */
    EMBEDDED,
    /** Each node in its own container on one Docker network (Testcontainers). */
    CONTAINERS;

    /** The system property that chooses the backend of clusters that do not name one. */
    public static final String PROPERTY = "pagewire.testkit.backend";
    /** The environment variable read when the property is not set. */
    public static final String ENVIRONMENT = "PAGEWIRE_TESTKIT_BACKEND";

    /** The backend the property or the environment names, {@link #EMBEDDED} when neither does. */
    public static ClusterBackend configured() {
        String value = System.getProperty(PROPERTY, System.getenv(ENVIRONMENT));
        return value == null || value.isBlank() ? EMBEDDED : parse(value);
    }

    static ClusterBackend parse(String value) {
        try {
            return valueOf(value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(PROPERTY + " must be one of " + Arrays.toString(values()).toLowerCase(Locale.ROOT)
                    + ", not '" + value + "'");
        }
    }
}
