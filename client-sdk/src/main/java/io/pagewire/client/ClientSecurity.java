package io.pagewire.client;

import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;

/**
 * How an application proves who it is to a node and checks the node: mutual TLS with a certificate
 * of the testbed's CA ({@code pagewire certs} makes one per application), an optional application
 * token, or plaintext for a node that runs without TLS.
 *
 * @param trustedCaFile the CA whose certificates the node's must come from (PEM); null for plaintext
 * @param certificateFile this application's certificate (PEM); null for plaintext
 * @param privateKeyFile its private key (PKCS#8 PEM); null for plaintext
 * @param serverName the node id to expect in the node's certificate when the address does not say it
 *     (a node reached as localhost:7101 is node-1); null to check the address itself
 * @param token the node's application token, sent on every call; empty for none
 */
public record ClientSecurity(Path trustedCaFile, Path certificateFile, Path privateKeyFile, String serverName, String token) {
    public ClientSecurity {
        boolean anyFile = trustedCaFile != null || certificateFile != null || privateKeyFile != null;
        boolean allFiles = trustedCaFile != null && certificateFile != null && privateKeyFile != null;
        if (anyFile && !allFiles) {
            throw new IllegalArgumentException("mutual TLS needs the CA file, the certificate and its private key; given: CA " + trustedCaFile
                    + ", certificate " + certificateFile + ", key " + privateKeyFile);
        }
        token = token == null ? "" : token;
    }

    /** No TLS, no token: for nodes that run plaintext (local experiments). */
    public static ClientSecurity plaintext() {
        return new ClientSecurity(null, null, null, null, "");
    }

    /** Mutual TLS with the files {@code pagewire certs} wrote for {@code name} in {@code directory}. */
    public static ClientSecurity mutualTls(Path directory, String name) {
        return new ClientSecurity(directory.resolve("ca.pem"), directory.resolve(name + ".pem"), directory.resolve(name + ".key"), null, "");
    }

    /**
     * What the environment says, with the variable names the node itself reads, so that a process
     * beside a node (a container's health probe, {@code pagewire stat}) shares its settings:
     * {@code PAGEWIRE_SECURITY_TRANSPORT} (plaintext turns TLS off), {@code PAGEWIRE_SECURITY_TRUSTED_CA_FILE},
     * {@code PAGEWIRE_SECURITY_CERTIFICATE_FILE}, {@code PAGEWIRE_SECURITY_PRIVATE_KEY_FILE}, or
     * {@code PAGEWIRE_SECURITY_CERTIFICATE_DIRECTORY} with the files of {@code PAGEWIRE_SECURITY_IDENTITY}
     * (else {@code PAGEWIRE_NODE_ID}); {@code PAGEWIRE_SECURITY_SERVER_NAME}; {@code PAGEWIRE_SECURITY_APPLICATION_TOKEN}.
     * Nothing set is plaintext.
     */
    public static ClientSecurity fromEnvironment(Map<String, String> environment) {
        String token = environment.getOrDefault("PAGEWIRE_SECURITY_APPLICATION_TOKEN", "").trim();
        String serverName = blankToNull(environment.get("PAGEWIRE_SECURITY_SERVER_NAME"));
        if ("plaintext".equals(environment.getOrDefault("PAGEWIRE_SECURITY_TRANSPORT", "").trim().toLowerCase(Locale.ROOT))) {
            return new ClientSecurity(null, null, null, null, token);
        }
        Path ca = path(environment.get("PAGEWIRE_SECURITY_TRUSTED_CA_FILE"));
        Path certificate = path(environment.get("PAGEWIRE_SECURITY_CERTIFICATE_FILE"));
        Path key = path(environment.get("PAGEWIRE_SECURITY_PRIVATE_KEY_FILE"));
        Path directory = path(environment.get("PAGEWIRE_SECURITY_CERTIFICATE_DIRECTORY"));
        if (directory != null) {
            String identity = blankToNull(environment.getOrDefault("PAGEWIRE_SECURITY_IDENTITY", environment.get("PAGEWIRE_NODE_ID")));
            if (identity == null && (certificate == null || key == null)) {
                throw new IllegalArgumentException("PAGEWIRE_SECURITY_CERTIFICATE_DIRECTORY is set, but not whose files to use:"
                        + " set PAGEWIRE_SECURITY_IDENTITY to the application's name");
            }
            ca = ca != null ? ca : directory.resolve("ca.pem");
            certificate = certificate != null ? certificate : directory.resolve(identity + ".pem");
            key = key != null ? key : directory.resolve(identity + ".key");
        }
        return new ClientSecurity(ca, certificate, key, serverName, token);
    }

    /** Whether calls run over mutual TLS. */
    public boolean tls() {
        return certificateFile != null;
    }

    public ClientSecurity withToken(String value) {
        return new ClientSecurity(trustedCaFile, certificateFile, privateKeyFile, serverName, value);
    }

    public ClientSecurity withServerName(String value) {
        return new ClientSecurity(trustedCaFile, certificateFile, privateKeyFile, value, token);
    }

    private static Path path(String value) {
        return value == null || value.isBlank() ? null : Path.of(value.trim());
    }

    private static String blankToNull(String value) {
        return value == null || value.isBlank() ? null : value.trim();
    }

    @Override
    public String toString() {
        return (tls() ? "mutual TLS as " + certificateFile + (serverName == null ? "" : ", expecting " + serverName) : "plaintext")
                + (token.isEmpty() ? "" : ", with a token");
    }
}
