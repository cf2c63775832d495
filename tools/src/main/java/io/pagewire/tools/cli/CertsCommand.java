package io.pagewire.tools.cli;

import io.pagewire.tools.testbed.TestbedCertificates;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code pagewire certs}: a testbed's CA and the certificates of its nodes and applications, what
 * mutual TLS between nodes and on the verbs port runs with.
 */
@Command(name = "certs", mixinStandardHelpOptions = true,
        description = {"Makes a testbed CA (or reuses the one in --out) and issues certificates to nodes and applications.",
            "Start each node with pagewire.security.certificateDirectory=DIR; applications use --certs DIR --as NAME",
            "(SDK: ClientSecurity.mutualTls(DIR, NAME)). Keys are written readable by their owner only.",
            "Also makes DIR/metrics.token (kept when there): with pagewire.security.metricsTokenFile=DIR/metrics.token a node's",
            "/metrics answers only a scraper that sends it as a bearer token (Prometheus: authorization.credentials_file)."})
final class CertsCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Option(names = {"-o", "--out"}, paramLabel = "DIR", required = true, description = "Where the CA and the certificates go.")
    Path out;

    @Parameters(arity = "0..*", paramLabel = "NODE_ID", description = "Nodes to issue certificates to (their ids, e.g. node-1 node-2).")
    List<String> nodes = new ArrayList<>();

    @Option(names = {"-a", "--application"}, paramLabel = "NAME", split = ",",
            description = "Applications to issue client certificates to (default: app).")
    List<String> applications = new ArrayList<>();

    @Option(names = "--host", paramLabel = "NAME_OR_IP", split = ",", defaultValue = "localhost,127.0.0.1",
            description = "Further names every node's certificate is valid for, as applications reach it (default: ${DEFAULT-VALUE}).")
    List<String> hosts = new ArrayList<>();

    @Override
    public Integer call() {
        PrintWriter printed = spec.commandLine().getOut();
        TestbedCertificates ca = TestbedCertificates.in(out);
        printed.printf("CA: %s%n", ca.caFile());
        for (String node : nodes) {
            TestbedCertificates.Issued issued = ca.issueNode(node, hosts);
            printed.printf("node %s: %s, %s%n", node, issued.certificateFile(), issued.privateKeyFile());
        }
        for (String application : applications.isEmpty() ? List.of("app") : applications) {
            TestbedCertificates.Issued issued = ca.issueApplication(application);
            printed.printf("application %s: %s, %s%n", application, issued.certificateFile(), issued.privateKeyFile());
        }
        printed.printf("metrics token (pagewire.security.metricsTokenFile, Prometheus' credentials_file): %s%n", ca.metricsToken());
        printed.flush();
        return 0;
    }
}
