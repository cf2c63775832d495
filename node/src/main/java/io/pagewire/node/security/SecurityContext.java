package io.pagewire.node.security;

import static io.pagewire.node.security.SecurityConfiguration.APPLICATION_TOKEN;
import static io.pagewire.node.security.SecurityConfiguration.CERTIFICATE_DIRECTORY;
import static io.pagewire.node.security.SecurityConfiguration.CERTIFICATE_FILE;
import static io.pagewire.node.security.SecurityConfiguration.METRICS_TOKEN;
import static io.pagewire.node.security.SecurityConfiguration.METRICS_TOKEN_FILE;
import static io.pagewire.node.security.SecurityConfiguration.PRIVATE_KEY_FILE;
import static io.pagewire.node.security.SecurityConfiguration.TRANSPORT;
import static io.pagewire.node.security.SecurityConfiguration.TRUSTED_CA_FILE;

import io.grpc.ChannelCredentials;
import io.grpc.ServerCredentials;
import io.grpc.TlsChannelCredentials;
import io.grpc.TlsServerCredentials;
import io.pagewire.config.SettingValues;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.cert.Certificate;

/**
 * How a node's port is protected: mutual TLS with the testbed CA's certificates (the default), or
 * plaintext by explicit setting for local experiments; and the optional token applications must
 * send on the verbs service. {@link #conclude} checks that the files are there and that the
 * certificate names this node, so a misconfigured node stops at start with a message, not at the
 * first handshake.
 */
public final class SecurityContext {
    /** What protects the node's port. */
    public enum TransportSecurity {
        /** TLS both ways: the node and every caller show a certificate of the testbed CA. */
        MTLS,
        /** No TLS, no certificates: anyone who reaches the port may call it. For local experiments. */
        PLAINTEXT
    }

    private final SettingValues settings = new SettingValues(SecurityConfiguration.SETTINGS);
    private Path certificateFile;
    private Path privateKeyFile;
    private Path trustedCaFile;
    private String metricsToken;
    private boolean networked;

    /** The values of the security settings, by descriptor (the node's settings registry writes them by name). */
    public SettingValues settings() {
        return settings;
    }

    public SecurityContext transport(TransportSecurity value) {
        settings.set(TRANSPORT, value);
        return this;
    }

    /** Plaintext, said explicitly: what local experiments and benchmarks of the emulator itself run with. */
    public SecurityContext plaintext() {
        return transport(TransportSecurity.PLAINTEXT);
    }

    /** A directory as {@code pagewire certs} writes it: {@code ca.pem}, and {@code ID.pem} / {@code ID.key} for this node. */
    public SecurityContext certificateDirectory(Path value) {
        settings.set(CERTIFICATE_DIRECTORY, value);
        return this;
    }

    public SecurityContext certificateFile(Path value) {
        settings.set(CERTIFICATE_FILE, value);
        return this;
    }

    public SecurityContext privateKeyFile(Path value) {
        settings.set(PRIVATE_KEY_FILE, value);
        return this;
    }

    public SecurityContext trustedCaFile(Path value) {
        settings.set(TRUSTED_CA_FILE, value);
        return this;
    }

    /** A secret applications must send ({@code authorization: Bearer TOKEN}) to use the verbs service; empty for none. */
    public SecurityContext applicationToken(String value) {
        settings.set(APPLICATION_TOKEN, value == null ? "" : value);
        return this;
    }

    /**
     * A secret the scraper must send ({@code Authorization: Bearer TOKEN}) to read {@code /metrics},
     * which is plain HTTP; empty for none (anyone who reaches the port reads the node's meters).
     */
    public SecurityContext metricsToken(String value) {
        settings.set(METRICS_TOKEN, value == null ? "" : value);
        return this;
    }

    /** {@link #metricsToken} read from a file (its content, trimmed) when the context is concluded. */
    public SecurityContext metricsTokenFile(Path file) {
        settings.set(METRICS_TOKEN_FILE, file);
        return this;
    }

    /** The metrics token: the one set, or the token file's content once concluded. */
    public String metricsToken() {
        return metricsToken != null ? metricsToken : settings.get(METRICS_TOKEN);
    }

    public TransportSecurity transport() {
        return settings.get(TRANSPORT);
    }

    /** Whether the port runs mutual TLS (never for the in-process transport, which has no port). */
    public boolean mutualTls() {
        return networked && transport() == TransportSecurity.MTLS;
    }

    public String applicationToken() {
        return settings.get(APPLICATION_TOKEN);
    }

    public Path certificateFile() {
        return certificateFile != null ? certificateFile : settings.get(CERTIFICATE_FILE);
    }

    public Path privateKeyFile() {
        return privateKeyFile != null ? privateKeyFile : settings.get(PRIVATE_KEY_FILE);
    }

    public Path trustedCaFile() {
        return trustedCaFile != null ? trustedCaFile : settings.get(TRUSTED_CA_FILE);
    }

    /**
     * Validates the settings of node {@code nodeId}; {@code networked} is false for the in-process
     * transport, where there is no port to protect.
     */
    public SecurityContext conclude(String nodeId, boolean networked) {
        this.networked = networked;
        settings.check();
        Path tokenFile = settings.get(METRICS_TOKEN_FILE);
        if (tokenFile != null) {
            try {
                metricsToken = Files.readString(tokenFile, StandardCharsets.US_ASCII).trim();
            } catch (IOException e) {
                throw new IllegalArgumentException(METRICS_TOKEN_FILE.name() + ": cannot read " + tokenFile + ": " + e.getMessage(), e);
            }
            METRICS_TOKEN.check(metricsToken);
        }
        if (!networked || transport() == TransportSecurity.PLAINTEXT) {
            return this;
        }
        Path directory = settings.get(CERTIFICATE_DIRECTORY);
        certificateFile = settings.get(CERTIFICATE_FILE);
        privateKeyFile = settings.get(PRIVATE_KEY_FILE);
        trustedCaFile = settings.get(TRUSTED_CA_FILE);
        if (directory != null) {
            certificateFile = certificateFile != null ? certificateFile : directory.resolve(nodeId + ".pem");
            privateKeyFile = privateKeyFile != null ? privateKeyFile : directory.resolve(nodeId + ".key");
            trustedCaFile = trustedCaFile != null ? trustedCaFile : directory.resolve("ca.pem");
        }
        if (certificateFile == null || privateKeyFile == null || trustedCaFile == null) {
            throw new IllegalArgumentException("node " + nodeId + " has no certificate, and mutual TLS is on unless turned off: set "
                    + CERTIFICATE_DIRECTORY.name() + " (make one with `pagewire certs --out DIR " + nodeId + " ...`), or "
                    + CERTIFICATE_FILE.name() + ", " + PRIVATE_KEY_FILE.name() + " and " + TRUSTED_CA_FILE.name()
                    + "; or, for a local experiment, " + TRANSPORT.name() + "=plaintext");
        }
        readable(CERTIFICATE_FILE.name(), certificateFile);
        readable(PRIVATE_KEY_FILE.name(), privateKeyFile);
        readable(TRUSTED_CA_FILE.name(), trustedCaFile);
        PeerIdentity named;
        try {
            named = PeerIdentity.of(new Certificate[] {PeerIdentity.readCertificate(certificateFile)}).orElse(null);
        } catch (IOException | GeneralSecurityException e) {
            throw new IllegalArgumentException(CERTIFICATE_FILE.name() + " " + certificateFile + " is not a PEM certificate: " + e.getMessage());
        }
        if (!PeerIdentity.node(nodeId).equals(named)) {
            throw new IllegalArgumentException(CERTIFICATE_FILE.name() + " " + certificateFile + " is not node " + nodeId + "'s: it names "
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
