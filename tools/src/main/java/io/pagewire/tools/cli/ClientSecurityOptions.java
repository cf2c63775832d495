package io.pagewire.tools.cli;

import io.pagewire.client.ClientSecurity;
import java.nio.file.Path;
import picocli.CommandLine.Option;

/**
 * The options of the commands that call a node as an application ({@code stat}, {@code health},
 * {@code perf} against a cluster): the certificates to show, or plaintext. Without any, the
 * environment decides ({@link ClientSecurity#fromEnvironment}), so a probe inside a node's container
 * uses that node's settings.
 */
final class ClientSecurityOptions {
    @Option(names = "--certs", paramLabel = "DIR",
            description = "Call over mutual TLS with the files `pagewire certs` wrote in DIR (ca.pem, NAME.pem, NAME.key).")
    Path certificateDirectory;

    @Option(names = "--as", paramLabel = "NAME", defaultValue = "app",
            description = "Whose certificate in --certs to show (default: ${DEFAULT-VALUE}).")
    String identity;

    @Option(names = "--server-name", paramLabel = "NODE_ID",
            description = "The node id the node's certificate must name, when the address does not (default: the address).")
    String serverName;

    @Option(names = "--plaintext", description = "Call without TLS (a node started with pagewire.security.transport=plaintext).")
    boolean plaintext;

    @Option(names = "--token", paramLabel = "TOKEN", description = "The node's application token (default: $PAGEWIRE_SECURITY_APPLICATION_TOKEN).")
    String token;

    /** What the options say, the environment filling in what they do not. */
    ClientSecurity security() {
        ClientSecurity fromEnvironment = ClientSecurity.fromEnvironment(System.getenv());
        ClientSecurity chosen = plaintext ? ClientSecurity.plaintext().withToken(fromEnvironment.token())
                : certificateDirectory != null ? ClientSecurity.mutualTls(certificateDirectory, identity).withToken(fromEnvironment.token())
                : fromEnvironment;
        if (serverName != null) {
            chosen = chosen.withServerName(serverName);
        }
        return token != null ? chosen.withToken(token) : chosen;
    }
}
