package io.pagewire.node.security;

import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;
import io.grpc.TlsChannelCredentials;
import io.grpc.TlsServerCredentials;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.util.Locale;

/**
 * How a node's port is protected: mutual TLS with the testbed CA's certificates (the default), or
 * plaintext by explicit setting for local experiments; and the optional token applications must
 * send on the verbs service. {@link #conclude} checks that the files are there and that the
 * certificate names this node, so a misconfigured node stops at start with a message, not at the
 * first handshake.
 */
public final class SecurityContext {
    public static final String TRANSPORT_PROP_NAME = "pagewire.security.transport";
    public static final String CERTIFICATE_DIRECTORY_PROP_NAME = "pagewire.security.certificateDirectory";
    public static final String CERTIFICATE_FILE_PROP_NAME = "pagewire.security.certificateFile";
    public static final String PRIVATE_KEY_FILE_PROP_NAME = "pagewire.security.privateKeyFile";
    public static final String TRUSTED_CA_FILE_PROP_NAME = "pagewire.security.trustedCaFile";
    public static final String APPLICATION_TOKEN_PROP_NAME = "pagewire.security.applicationToken";
    public static final String METRICS_TOKEN_PROP_NAME = "pagewire.security.metricsToken";
    public static final String METRICS_TOKEN_FILE_PROP_NAME = "pagewire.security.metricsTokenFile";

    /** What protects the node's port. */
    public enum TransportSecurity {
        /** TLS both ways: the node and every caller show a certificate of the testbed CA. */
        MTLS,
        /** No TLS, no certificates: anyone who reaches the port may call it. For local experiments. */
        PLAINTEXT;

        public static TransportSecurity parse(String knob, String value) {
            try {
                return valueOf(value.trim().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(knob + " must be mtls or plaintext, was '" + value + "'");
            }
        }
    }

    private TransportSecurity transport = TransportSecurity.MTLS;
    private Path certificateDirectory;
    private Path certificateFile;
    private Path privateKeyFile;
    private Path trustedCaFile;
    private String applicationToken = "";
    private String metricsToken = "";
    private boolean networked;

    public SecurityContext transport(TransportSecurity value) {
        transport = value;
        return this;
    }

    /** Plaintext, said explicitly: what local experiments and benchmarks of the emulator itself run with. */
    public SecurityContext plaintext() {
        return transport(TransportSecurity.PLAINTEXT);
    }

    /** A directory as {@code pagewire certs} writes it: {@code ca.pem}, and {@code ID.pem} / {@code ID.key} for this node. */
    public SecurityContext certificateDirectory(Path value) {
        certificateDirectory = value;
        return this;
    }

    public SecurityContext certificateFile(Path value) {
        certificateFile = value;
        return this;
    }

    public SecurityContext privateKeyFile(Path value) {
        privateKeyFile = value;
        return this;
    }

    public SecurityContext trustedCaFile(Path value) {
        trustedCaFile = value;
        return this;
    }

    /** A secret applications must send ({@code authorization: Bearer TOKEN}) to use the verbs service; empty for none. */
    public SecurityContext applicationToken(String value) {
        applicationToken = value == null ? "" : value;
        return this;
    }

    /**
     * A secret the scraper must send ({@code Authorization: Bearer TOKEN}) to read {@code /metrics},
     * which is plain HTTP; empty for none (anyone who reaches the port reads the node's meters).
     */
    public SecurityContext metricsToken(String value) {
        metricsToken = value == null ? "" : value;
        return this;
    }

    /** {@link #metricsToken} read from a file (its content, trimmed): what {@code pagewire certs} writes as metrics.token. */
    public SecurityContext metricsTokenFile(Path file) {
        try {
            return metricsToken(java.nio.file.Files.readString(file, java.nio.charset.StandardCharsets.US_ASCII).trim());
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException(METRICS_TOKEN_FILE_PROP_NAME + ": cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    public String metricsToken() {
        return metricsToken;
    }

    public TransportSecurity transport() {
        return transport;
    }

    /** Whether the port runs mutual TLS (never for the in-process transport, which has no port). */
    public boolean mutualTls() {
        return networked && transport == TransportSecurity.MTLS;
    }

    public String applicationToken() {
        return applicationToken;
    }

    public Path certificateFile() {
        return certificateFile;
    }

    public Path privateKeyFile() {
        return privateKeyFile;
    }

    public Path trustedCaFile() {
        return trustedCaFile;
    }

    private static void requirePrintable(String knob, String token) {
        if (token.length() > 4096 || token.chars().anyMatch(c -> c < 0x21 || c > 0x7e)) {
            throw new IllegalArgumentException(knob + " must be up to 4096 printable ASCII characters without spaces");
        }
    }

    /**
     * Validates the settings of node {@code nodeId}; {@code networked} is false for the in-process
     * transport, where there is no port to protect.
     */
    public SecurityContext conclude(String nodeId, boolean networked) {
        this.networked = networked;
        requirePrintable(APPLICATION_TOKEN_PROP_NAME, applicationToken);
        requirePrintable(METRICS_TOKEN_PROP_NAME, metricsToken);
        if (!networked || transport == TransportSecurity.PLAINTEXT) {
            return this;
        }
        if (certificateDirectory != null) {
            certificateFile = certificateFile != null ? certificateFile : certificateDirectory.resolve(nodeId + ".pem");
            privateKeyFile = privateKeyFile != null ? privateKeyFile : certificateDirectory.resolve(nodeId + ".key");
            trustedCaFile = trustedCaFile != null ? trustedCaFile : certificateDirectory.resolve("ca.pem");
        }
        if (certificateFile == null || privateKeyFile == null || trustedCaFile == null) {
            throw new IllegalArgumentException("node " + nodeId + " has no certificate, and mutual TLS is on unless turned off: set "
                    + CERTIFICATE_DIRECTORY_PROP_NAME + " (make one with `pagewire certs --out DIR " + nodeId + " ...`), or "
                    + CERTIFICATE_FILE_PROP_NAME + ", " + PRIVATE_KEY_FILE_PROP_NAME + " and " + TRUSTED_CA_FILE_PROP_NAME
                    + "; or, for a local experiment, " + TRANSPORT_PROP_NAME + "=plaintext");
        }
        readable(CERTIFICATE_FILE_PROP_NAME, certificateFile);
        readable(PRIVATE_KEY_FILE_PROP_NAME, privateKeyFile);
        readable(TRUSTED_CA_FILE_PROP_NAME, trustedCaFile);
        PeerIdentity named;
        try {
            named = PeerIdentity.of(new java.security.cert.Certificate[] {TestbedCertificates.readCertificate(certificateFile)}).orElse(null);
        } catch (IOException | GeneralSecurityException e) {
            throw new IllegalArgumentException(CERTIFICATE_FILE_PROP_NAME + " " + certificateFile + " is not a PEM certificate: " + e.getMessage());
        }
        if (!PeerIdentity.node(nodeId).equals(named)) {
            throw new IllegalArgumentException(CERTIFICATE_FILE_PROP_NAME + " " + certificateFile + " is not node " + nodeId + "'s: it names "
                    + (named == null ? "no Pagewire identity" : named) + " (peers would refuse this node's lanes)");
        }
        return this;
    }

    private static void readable(String knob, Path file) {
        if (!Files.isReadable(file)) {
            throw new IllegalArgumentException(knob + " " + file + (Files.exists(file) ? " cannot be read by this process" : " does not exist"));
        }
    }

    /** The server side of mutual TLS: this node's certificate, and callers must show one of the CA's. */
    public ServerCredentials serverCredentials() {
        try {
            return TlsServerCredentials.newBuilder().keyManager(certificateFile.toFile(), privateKeyFile.toFile())
                    .trustManager(trustedCaFile.toFile()).clientAuth(TlsServerCredentials.ClientAuth.REQUIRE).build();
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot load the node's TLS material: " + e.getMessage(), e);
        }
    }

    /** The dialling side: this node's certificate to show, and the CA the peer's must come from. */
    public ChannelCredentials channelCredentials() {
        try {
            return TlsChannelCredentials.newBuilder().keyManager(certificateFile.toFile(), privateKeyFile.toFile())
                    .trustManager(trustedCaFile.toFile()).build();
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot load the node's TLS material: " + e.getMessage(), e);
        }
    }
}
