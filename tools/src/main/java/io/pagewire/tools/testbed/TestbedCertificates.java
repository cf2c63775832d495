package io.pagewire.tools.testbed;

import io.pagewire.node.security.PeerIdentity;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.PrivateKey;
import java.security.SecureRandom;
import java.security.cert.X509Certificate;
import java.security.spec.ECGenParameterSpec;
import java.security.spec.PKCS8EncodedKeySpec;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Date;
import java.util.HexFormat;
import java.util.List;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.bouncycastle.asn1.x500.X500Name;
import org.bouncycastle.asn1.x509.BasicConstraints;
import org.bouncycastle.asn1.x509.ExtendedKeyUsage;
import org.bouncycastle.asn1.x509.Extension;
import org.bouncycastle.asn1.x509.GeneralName;
import org.bouncycastle.asn1.x509.GeneralNames;
import org.bouncycastle.asn1.x509.KeyPurposeId;
import org.bouncycastle.asn1.x509.KeyUsage;
import org.bouncycastle.cert.X509v3CertificateBuilder;
import org.bouncycastle.cert.jcajce.JcaX509CertificateConverter;
import org.bouncycastle.cert.jcajce.JcaX509ExtensionUtils;
import org.bouncycastle.cert.jcajce.JcaX509v3CertificateBuilder;
import org.bouncycastle.operator.OperatorCreationException;
import org.bouncycastle.operator.jcajce.JcaContentSignerBuilder;

/**
 * A testbed's certificate authority and the certificates it issues to nodes and applications, as
 * PEM files in one directory ({@code ca.pem}, {@code ca.key}, {@code NAME.pem}, {@code NAME.key}):
 * what {@code pagewire certs}, the embedded demo and the test clusters turn mutual TLS on with.
 * A node's certificate names it twice, as DNS name (what a dialling peer checks, the way a browser
 * checks a host) and as {@link PeerIdentity} URI (what the node that accepts a lane checks against
 * the id the lane's hello claims); an application's carries only its URI, so it can never open a lane.
 * Keys are ECDSA P-256; the JDK signs, Bouncy Castle builds the certificates.
 */
public final class TestbedCertificates {
    /** Names that are a DNS label sequence: what a certificate's DNS name and a TLS authority can be. */
    private static final Pattern NAME = Pattern.compile("[A-Za-z0-9](?:[A-Za-z0-9.-]{0,62}[A-Za-z0-9])?");
    private static final Duration VALIDITY = Duration.ofDays(825);
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Path directory;
    private final X509Certificate ca;
    private final PrivateKey caKey;

    private TestbedCertificates(Path directory, X509Certificate ca, PrivateKey caKey) {
        this.directory = directory;
        this.ca = ca;
        this.caKey = caKey;
    }

    /**
     * The authority in a directory: the one already there ({@code ca.pem} and {@code ca.key}), so that
     * nodes added later join the same testbed, or a new one.
     */
    public static TestbedCertificates in(Path directory) {
        try {
            Files.createDirectories(directory);
            Path caFile = directory.resolve("ca.pem");
            Path caKeyFile = directory.resolve("ca.key");
            if (Files.exists(caFile) && Files.exists(caKeyFile)) {
                return new TestbedCertificates(directory, PeerIdentity.readCertificate(caFile), readPrivateKey(caKeyFile));
            }
            KeyPair keys = newKeyPair();
            X500Name name = new X500Name("CN=Pagewire testbed CA " + Long.toHexString(RANDOM.nextLong() >>> 16));
            Instant now = Instant.now();
            X509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(name, serial(), Date.from(now.minus(Duration.ofHours(1))),
                    Date.from(now.plus(VALIDITY)), name, keys.getPublic());
            JcaX509ExtensionUtils extensions = new JcaX509ExtensionUtils();
            builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(0));
            builder.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.keyCertSign | KeyUsage.cRLSign));
            builder.addExtension(Extension.subjectKeyIdentifier, false, extensions.createSubjectKeyIdentifier(keys.getPublic()));
            X509Certificate certificate = sign(builder, keys.getPrivate());
            writePem(caFile, "CERTIFICATE", certificate.getEncoded(), false);
            writePem(caKeyFile, "PRIVATE KEY", keys.getPrivate().getEncoded(), true);
            return new TestbedCertificates(directory, certificate, keys.getPrivate());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the testbed CA in " + directory + ": " + e.getMessage(), e);
        } catch (GeneralSecurityException | OperatorCreationException e) {
            throw new IllegalStateException("cannot make a testbed CA: " + e.getMessage(), e);
        }
    }

    /**
     * The testbed's metrics token ({@code metrics.token}: 64 hex digits), made when the directory has
     * none: the secret nodes ask of whoever scrapes their {@code /metrics}
     * ({@code pagewire.security.metricsTokenFile}) and Prometheus sends ({@code authorization.credentials_file}).
     * Unlike the keys it is readable by every user (rw-r--r--), since the scraper runs as another user
     * than the nodes; whoever may read the directory may read the nodes' meters.
     */
    public Path metricsToken() {
        Path file = directory.resolve("metrics.token");
        if (Files.exists(file)) {
            return file;
        }
        byte[] secret = new byte[32];
        RANDOM.nextBytes(secret);
        try {
            writeAtomically(file, HexFormat.of().formatHex(secret) + "\n", false);
            return file;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the metrics token in " + directory + ": " + e.getMessage(), e);
        }
    }

    /**
     * A throw-away testbed in a new temporary directory: a CA, a certificate for each node (also valid
     * for localhost and 127.0.0.1, where a test's applications reach them) and one for {@code application}.
     * {@link #deleteDirectory} removes it.
     */
    public static Path temporary(List<String> nodeIds, String application) {
        Path directory;
        try {
            directory = Files.createTempDirectory("pagewire-certs-");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot make a temporary certificate directory: " + e.getMessage(), e);
        }
        TestbedCertificates ca = in(directory);
        for (String node : nodeIds) {
            ca.issueNode(node, List.of("localhost", "127.0.0.1"));
        }
        ca.issueApplication(application);
        return directory;
    }

    /** Deletes a directory of certificates ({@link #temporary}'s); one left behind is not worth failing for. */
    public static void deleteDirectory(Path directory) {
        if (directory == null) {
            return;
        }
        try (Stream<Path> files = Files.list(directory)) {
            for (Path file : files.toList()) {
                Files.deleteIfExists(file);
            }
            Files.deleteIfExists(directory);
        } catch (IOException e) {
            // left for the temporary directory's owner to clean
        }
    }

    /** The CA's certificate file: what every node and application trusts. */
    public Path caFile() {
        return directory.resolve("ca.pem");
    }

    public Path directory() {
        return directory;
    }

    /**
     * Issues a node's certificate and key ({@code ID.pem}, {@code ID.key}), valid for serving and for
     * dialling; {@code hosts} are further DNS names or IP addresses applications may reach it by
     * (localhost, 127.0.0.1).
     */
    public Issued issueNode(String nodeId, List<String> hosts) {
        List<GeneralName> names = new ArrayList<>();
        names.add(new GeneralName(GeneralName.dNSName, checkedName("node id", nodeId)));
        names.add(new GeneralName(GeneralName.uniformResourceIdentifier, PeerIdentity.node(nodeId).uri()));
        for (String host : hosts) {
            names.add(isAddress(host) ? new GeneralName(GeneralName.iPAddress, host) : new GeneralName(GeneralName.dNSName, checkedName("host", host)));
        }
        return issue(nodeId, names, new KeyPurposeId[] {KeyPurposeId.id_kp_serverAuth, KeyPurposeId.id_kp_clientAuth});
    }

    /** Issues an application's client certificate and key ({@code NAME.pem}, {@code NAME.key}). */
    public Issued issueApplication(String name) {
        List<GeneralName> names = List.of(new GeneralName(GeneralName.uniformResourceIdentifier,
                PeerIdentity.application(checkedName("application name", name)).uri()));
        return issue(name, names, new KeyPurposeId[] {KeyPurposeId.id_kp_clientAuth});
    }

    private Issued issue(String name, List<GeneralName> subjectNames, KeyPurposeId[] purposes) {
        try {
            KeyPair keys = newKeyPair();
            Instant now = Instant.now();
            X509v3CertificateBuilder builder = new JcaX509v3CertificateBuilder(ca, serial(), Date.from(now.minus(Duration.ofHours(1))),
                    Date.from(now.plus(VALIDITY)), new X500Name("CN=" + name), keys.getPublic());
            JcaX509ExtensionUtils extensions = new JcaX509ExtensionUtils();
            builder.addExtension(Extension.basicConstraints, true, new BasicConstraints(false));
            builder.addExtension(Extension.keyUsage, true, new KeyUsage(KeyUsage.digitalSignature | KeyUsage.keyAgreement));
            builder.addExtension(Extension.extendedKeyUsage, false, new ExtendedKeyUsage(purposes));
            builder.addExtension(Extension.subjectAlternativeName, false, new GeneralNames(subjectNames.toArray(GeneralName[]::new)));
            builder.addExtension(Extension.authorityKeyIdentifier, false, extensions.createAuthorityKeyIdentifier(ca));
            builder.addExtension(Extension.subjectKeyIdentifier, false, extensions.createSubjectKeyIdentifier(keys.getPublic()));
            X509Certificate certificate = sign(builder, caKey);
            Path certificateFile = directory.resolve(name + ".pem");
            Path keyFile = directory.resolve(name + ".key");
            writePem(certificateFile, "CERTIFICATE", certificate.getEncoded(), false);
            writePem(keyFile, "PRIVATE KEY", keys.getPrivate().getEncoded(), true);
            return new Issued(certificateFile, keyFile, caFile());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the certificate of " + name + " in " + directory + ": " + e.getMessage(), e);
        } catch (GeneralSecurityException | OperatorCreationException e) {
            throw new IllegalStateException("cannot issue a certificate to " + name + ": " + e.getMessage(), e);
        }
    }

    /** One issued identity's files: its certificate, its private key (PKCS#8) and the CA that signed it. */
    public record Issued(Path certificateFile, Path privateKeyFile, Path caFile) {
    }

    private static String checkedName(String what, String name) {
        if (name == null || !NAME.matcher(name).matches()) {
            throw new IllegalArgumentException("a certificate's " + what + " must be a DNS name (letters, digits, '-', '.', 1 to 64), was '"
                    + name + "'");
        }
        return name;
    }

    private static boolean isAddress(String host) {
        return host.matches("[0-9.]+") || host.contains(":");
    }

    private static KeyPair newKeyPair() throws GeneralSecurityException {
        KeyPairGenerator generator = KeyPairGenerator.getInstance("EC");
        generator.initialize(new ECGenParameterSpec("secp256r1"), RANDOM);
        return generator.generateKeyPair();
    }

    private static BigInteger serial() {
        return new BigInteger(127, RANDOM).add(BigInteger.ONE);
    }

    private static X509Certificate sign(X509v3CertificateBuilder builder, PrivateKey key) throws OperatorCreationException, GeneralSecurityException {
        return new JcaX509CertificateConverter().getCertificate(builder.build(new JcaContentSignerBuilder("SHA256withECDSA").build(key)));
    }

    private static void writePem(Path file, String type, byte[] der, boolean secret) throws IOException {
        writeAtomically(file, "-----BEGIN " + type + "-----\n" + Base64.getMimeEncoder(64, new byte[] {'\n'}).encodeToString(der) + "\n-----END "
                + type + "-----\n", secret);
    }

    /**
     * Writes {@code content} to {@code file} through a temporary file moved into place, readable by its
     * owner only when {@code secret}, by everyone otherwise.
     */
    private static void writeAtomically(Path file, String content, boolean secret) throws IOException {
        Path temporary = Files.createTempFile(file.getParent(), "." + file.getFileName(), ".tmp");
        try {
            if (secret) {
                restrictToOwner(temporary);
            }
            Files.writeString(temporary, content, StandardCharsets.US_ASCII, StandardOpenOption.TRUNCATE_EXISTING);
            if (!secret) {
                Files.setPosixFilePermissions(temporary, PosixFilePermissions.fromString("rw-r--r--"));
            }
            Files.move(temporary, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } finally {
            Files.deleteIfExists(temporary);
        }
    }

    private static void restrictToOwner(Path file) throws IOException {
        try {
            Files.setPosixFilePermissions(file, PosixFilePermissions.fromString("rw-------"));
        } catch (UnsupportedOperationException e) {
            // Not a POSIX file system: the directory's own permissions are what protects the key.
        }
    }

    private static PrivateKey readPrivateKey(Path file) throws IOException, GeneralSecurityException {
        String pem = Files.readString(file, StandardCharsets.US_ASCII);
        String body = pem.replaceAll("-----(BEGIN|END) PRIVATE KEY-----", "").replaceAll("\\s", "");
        return KeyFactory.getInstance("EC").generatePrivate(new PKCS8EncodedKeySpec(Base64.getDecoder().decode(body)));
    }
}
