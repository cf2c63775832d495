package io.pagewire.node.security;

import io.pagewire.config.Setting;
import java.nio.file.Path;
import java.util.List;

/**
 * Every knob of how a node's port is protected, each declared once: name, type, default, check and
 * doc. {@link SecurityContext} holds their values and checks the files they name.
 */
public final class SecurityConfiguration {
    public static final Setting<SecurityContext.TransportSecurity> TRANSPORT = Setting.choice("pagewire.security.transport",
            SecurityContext.TransportSecurity.class, SecurityContext.TransportSecurity.MTLS,
            "mtls (the default: nodes and applications show certificates of the testbed CA) or plaintext (local experiments only)")
            .where(v -> v != null, "set");
    public static final Setting<Path> CERTIFICATE_DIRECTORY = Setting.path("pagewire.security.certificateDirectory",
            "A directory as `pagewire certs` writes it: ca.pem, and ID.pem and ID.key for this node");
    public static final Setting<Path> CERTIFICATE_FILE = Setting.path("pagewire.security.certificateFile",
            "This node's certificate (PEM), if not ID.pem in the certificate directory");
    public static final Setting<Path> PRIVATE_KEY_FILE = Setting.path("pagewire.security.privateKeyFile",
            "This node's private key (PEM), if not ID.key in the certificate directory");
    public static final Setting<Path> TRUSTED_CA_FILE = Setting.path("pagewire.security.trustedCaFile",
            "The CA whose certificates peers and applications must show (PEM), if not ca.pem in the certificate directory");
    public static final Setting<String> APPLICATION_TOKEN = Setting.text("pagewire.security.applicationToken", "",
            "A secret applications must send (authorization: Bearer TOKEN) to use the verbs service; empty for none")
            .where(SecurityConfiguration::printable, "up to 4096 printable ASCII characters without spaces");
    public static final Setting<String> METRICS_TOKEN = Setting.text("pagewire.security.metricsToken", "",
            "A secret the scraper must send (Authorization: Bearer TOKEN) to read /metrics; empty for none")
            .where(SecurityConfiguration::printable, "up to 4096 printable ASCII characters without spaces");
    public static final Setting<Path> METRICS_TOKEN_FILE = Setting.path("pagewire.security.metricsTokenFile",
            "A file holding the metrics token (what `pagewire certs` writes as metrics.token), read at start");

    /** Every setting above, in declaration order. */
    public static final List<Setting<?>> SETTINGS = Setting.declaredIn(SecurityConfiguration.class);

    private SecurityConfiguration() {
    }

    private static boolean printable(String token) {
        return token.length() <= 4096 && token.chars().allMatch(c -> c >= 0x21 && c <= 0x7e);
    }
}
