package io.pagewire.testkit;

import com.github.dockerjava.api.DockerClient;
import com.github.dockerjava.api.command.InspectContainerResponse;
import com.github.dockerjava.api.model.ContainerNetwork;
import com.github.dockerjava.api.model.ExposedPort;
import com.github.dockerjava.api.model.Ports;
import io.pagewire.client.ConnectOptions;
import io.pagewire.client.Pagewire;
import io.pagewire.node.NodeConfiguration;
import io.pagewire.node.NodeSettings;
import io.pagewire.node.security.SecurityConfiguration;
import io.pagewire.node.security.SecurityContext;
import java.io.IOException;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.testcontainers.DockerClientFactory;
import org.testcontainers.containers.GenericContainer;
import org.testcontainers.containers.Network;
import org.testcontainers.containers.wait.strategy.Wait;
import org.testcontainers.lifecycle.Startables;
import org.testcontainers.utility.DockerImageName;
import org.testcontainers.utility.MountableFile;

/**
 * The container backing: each node in its own container of the node image, on one Docker network
 * where peers find each other by name (node-1:7100). The test's JVM reaches each node through the
 * ports Docker publishes on the host; a restarted container keeps its name and its volume, not its ports.
 */
final class ContainerTestCluster extends TestClusterBase<ContainerTestCluster.ContainerNode> {
    static final int VERBS_PORT = 7100;
    static final int METRICS_PORT = 9464;
    private static final int LOG_LINES = 40;
    /** Where a node container finds its certificates. */
    static final String CERTIFICATES = "/var/lib/pagewire/certs";

    private final Network network = Network.newNetwork();

    private ContainerTestCluster(ClusterSpec spec) {
        super(spec, true);
    }

    static ContainerTestCluster start(ClusterSpec spec) {
        ContainerTestCluster cluster = new ContainerTestCluster(spec);
        try {
            for (int i = 1; i <= spec.size(); i++) {
                cluster.nodes.add(new ContainerNode(cluster, ClusterSpec.nodeId(i)));
            }
            // Each node's environment names its peers, so it is set once every node exists.
            for (ContainerNode node : cluster.nodes) {
                node.container.withEnv(cluster.environment(node.id));
                if (cluster.certificates() != null) {
                    // The node's own certificate and key and the CA's certificate, readable by the image's user.
                    for (String file : List.of("ca.pem", node.id + ".pem", node.id + ".key")) {
                        node.container.withCopyFileToContainer(MountableFile.forHostPath(cluster.certificates().resolve(file), 0644),
                                CERTIFICATES + "/" + file);
                    }
                }
            }
            Startables.deepStart(cluster.nodes.stream().map(n -> n.container)).get(spec.startTimeout().toMillis(), TimeUnit.MILLISECONDS);
            cluster.nodes.forEach(n -> n.running = true);
            cluster.awaitLinks(spec.startTimeout());
            return cluster;
        } catch (Exception e) {
            String state = cluster.describe();
            cluster.close();
            throw new IllegalStateException("the container cluster (" + spec + ") did not start: " + e.getMessage() + "\n" + state, e);
        }
    }

    @Override
    public Optional<Network> network() {
        return Optional.of(network);
    }

    @Override
    protected void stopNodes() {
        for (ContainerNode node : nodes) {
            node.container.stop();
        }
        network.close();
    }

    /** The environment of node {@code id}: its identity, its peers by container name, and the spec's settings. */
    private Map<String, String> environment(String id) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put(NodeSettings.environmentName(NodeConfiguration.ID.name()), id);
        env.put(NodeSettings.environmentName(NodeConfiguration.PEERS.name()), nodes.stream().map(n -> n.id).filter(p -> !p.equals(id))
                .map(p -> p + "=" + p + ":" + VERBS_PORT).collect(Collectors.joining(",")));
        if (certificates() != null) {
            env.put(NodeSettings.environmentName(SecurityConfiguration.CERTIFICATE_DIRECTORY.name()), CERTIFICATES);
        }
        spec().settings().forEach((name, value) -> env.put(NodeSettings.environmentName(name), value));
        return env;
    }

    /** A node in its container; stop, kill and restart act on the same container, so its name and volumes stay. */
    static final class ContainerNode implements ClusterNode {
        private final ContainerTestCluster cluster;
        private final String id;
        private final GenericContainer<?> container;
        private volatile boolean running;

        @SuppressWarnings("resource")
        ContainerNode(ContainerTestCluster cluster, String id) {
            this.cluster = cluster;
            this.id = id;
            this.container = new GenericContainer<>(DockerImageName.parse(cluster.spec().image()))
                    .withNetwork(cluster.network)
                    .withNetworkAliases(id)
                    .withCreateContainerCmdModifier(cmd -> cmd.withHostName(id))
                    .withExposedPorts(VERBS_PORT, METRICS_PORT)
                    .waitingFor(Wait.forLogMessage(".*node " + id + " listening on .*", 1).withStartupTimeout(cluster.spec().startTimeout()));
        }

        private DockerClient docker() {
            return DockerClientFactory.instance().client();
        }

        private InspectContainerResponse inspect() {
            return docker().inspectContainerCmd(container.getContainerId()).exec();
        }

        /** The host port Docker publishes a container port on now (it changes when the container restarts). */
        private int hostPort(int containerPort) {
            Ports.Binding[] bindings = inspect().getNetworkSettings().getPorts().getBindings().get(ExposedPort.tcp(containerPort));
            if (bindings == null || bindings.length == 0) {
                throw new IllegalStateException(id + " publishes no port for " + containerPort + " (is it running?)");
            }
            return Integer.parseInt(bindings[0].getHostPortSpec());
        }

        @Override
        public String id() {
            return id;
        }

        @Override
        public String target() {
            return container.getHost() + ":" + hostPort(VERBS_PORT);
        }

        @Override
        public String metricsUrl() {
            return "http://" + container.getHost() + ":" + hostPort(METRICS_PORT) + "/metrics";
        }

        @Override
        public Pagewire connect(ConnectOptions options) {
            return cluster.track(this, options);
        }

        @Override
        public boolean running() {
            return running;
        }

        @Override
        public void stop() {
            running = false;
            docker().stopContainerCmd(container.getContainerId()).withTimeout(30).exec();
        }

        @Override
        public void kill() {
            running = false;
            docker().killContainerCmd(container.getContainerId()).withSignal("KILL").exec();
        }

        @Override
        public void restart() {
            if (running) {
                throw new IllegalStateException(id + " is running; stop or kill it first");
            }
            docker().startContainerCmd(container.getContainerId()).exec();
            running = true;
            long deadline = System.nanoTime() + cluster.spec().startTimeout().toNanos();
            while (true) {
                try (Pagewire probe = cluster.open(this, cluster.probeOptions()
                        .withDeadline(Duration.ofSeconds(2)))) {
                    probe.node();
                    break;
                } catch (RuntimeException e) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException(id + " did not come back after a restart: " + e.getMessage() + "\n" + logs(), e);
                    }
                    sleep(200);
                }
            }
            cluster.awaitLinks(cluster.spec().startTimeout());
        }

        /** The container's address on the cluster's network. */
        private String address() {
            for (ContainerNetwork network : inspect().getNetworkSettings().getNetworks().values()) {
                if (network.getIpAddress() != null && !network.getIpAddress().isEmpty()) {
                    return network.getIpAddress();
                }
            }
            throw new IllegalStateException(id + " has no address on the cluster's network");
        }

        @Override
        public void cutLink(String peer) {
            filter("-I", (ContainerNode) cluster.node(peer));
        }

        @Override
        public void healLink(String peer) {
            filter("-D", (ContainerNode) cluster.node(peer));
        }

        /**
         * Adds (-I) or removes (-D) rules in this container's network namespace that drop every packet
         * to and from the peer's address: a real cut, seen by both nodes' TCP stacks. It runs iptables
         * from the host inside the namespace (nsenter), so it needs root on the Docker host.
         */
        private void filter(String action, ContainerNode peer) {
            String pid = String.valueOf(inspect().getState().getPidLong());
            String peerAddress = peer.address();
            for (List<String> rule : List.of(List.of("INPUT", "-s"), List.of("OUTPUT", "-d"))) {
                List<String> command = List.of("nsenter", "-t", pid, "-n", "iptables", action, rule.get(0), rule.get(1), peerAddress, "-j", "DROP");
                run(command);
            }
        }

        private void run(List<String> command) {
            try {
                Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
                String output = new String(process.getInputStream().readAllBytes());
                if (!process.waitFor(30, TimeUnit.SECONDS) || process.exitValue() != 0) {
                    throw new IllegalStateException("cutting a container link needs root and iptables on the Docker host; "
                            + String.join(" ", command) + " failed: " + output.strip());
                }
            } catch (IOException e) {
                throw new IllegalStateException("cutting a container link needs nsenter and iptables on the Docker host: " + e.getMessage(), e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted", e);
            }
        }

        @Override
        public String logs() {
            try {
                List<String> lines = container.getLogs().lines().toList();
                return String.join("\n", lines.subList(Math.max(0, lines.size() - LOG_LINES), lines.size())) + "\n";
            } catch (RuntimeException e) {
                return "(no logs: " + e.getMessage() + ")\n";
            }
        }
    }
}
