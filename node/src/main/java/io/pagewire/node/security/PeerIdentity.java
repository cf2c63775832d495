package io.pagewire.node.security;

import io.grpc.Context;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.CertificateParsingException;
import java.security.cert.X509Certificate;
import java.util.Collection;
import java.util.List;
import java.util.Optional;

/**
 * Who is on the other end of a call, as its certificate says: a node (which may open lanes, as the
 * node its certificate names) or an application (which may use the verbs service only). Written
 * into a certificate as the URI {@code pagewire://node/ID} or {@code pagewire://app/NAME}.
 */
public record PeerIdentity(Kind kind, String name) {
    /** What a certificate was issued to. */
    public enum Kind {
        NODE("node"), APPLICATION("app");

        private final String path;

        Kind(String path) {
            this.path = path;
        }
    }

    private static final String SCHEME = "pagewire://";

    /** The caller's identity during a call on a mutual-TLS server; absent on a plaintext one. */
    public static final Context.Key<PeerIdentity> CURRENT = Context.key("pagewire-peer-identity");

    /** Reads a PEM (or DER) X.509 certificate: a node's own, a CA's. */
    public static X509Certificate readCertificate(Path file) throws IOException, GeneralSecurityException {
        try (InputStream in = Files.newInputStream(file)) {
            return (X509Certificate) CertificateFactory.getInstance("X.509").generateCertificate(in);
        }
    }

    public static PeerIdentity node(String id) {
        return new PeerIdentity(Kind.NODE, id);
    }

    public static PeerIdentity application(String name) {
        return new PeerIdentity(Kind.APPLICATION, name);
    }

    /** The URI a certificate carries for this identity. */
    public String uri() {
        return SCHEME + kind.path + "/" + name;
    }

    @Override
    public String toString() {
        return (kind == Kind.NODE ? "node " : "application ") + name;
    }

    /** The identity the first certificate of a TLS peer's chain names, if it names exactly one. */
    public static Optional<PeerIdentity> of(Certificate[] chain) {
        if (chain == null || chain.length == 0 || !(chain[0] instanceof X509Certificate leaf)) {
            return Optional.empty();
        }
        Collection<List<?>> names;
        try {
            names = leaf.getSubjectAlternativeNames();
        } catch (CertificateParsingException e) {
            return Optional.empty();
        }
        if (names == null) {
            return Optional.empty();
        }
        PeerIdentity found = null;
        for (List<?> name : names) {
            // Type 6 is a URI (RFC 5280's GeneralName uniformResourceIdentifier).
            if (name.size() < 2 || !Integer.valueOf(6).equals(name.get(0)) || !(name.get(1) instanceof String uri) || !uri.startsWith(SCHEME)) {
                continue;
            }
            PeerIdentity identity = parse(uri.substring(SCHEME.length()));
            if (identity == null || (found != null && !found.equals(identity))) {
                return Optional.empty();
            }
            found = identity;
        }
        return Optional.ofNullable(found);
    }

    private static PeerIdentity parse(String path) {
        int slash = path.indexOf('/');
        if (slash <= 0 || slash == path.length() - 1) {
            return null;
        }
        String kind = path.substring(0, slash);
        String name = path.substring(slash + 1);
        for (Kind k : Kind.values()) {
            if (k.path.equals(kind)) {
                return new PeerIdentity(k, name);
            }
        }
        return null;
    }
}
