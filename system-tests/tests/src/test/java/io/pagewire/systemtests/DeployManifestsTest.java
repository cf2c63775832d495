package io.pagewire.systemtests;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.fasterxml.jackson.dataformat.yaml.YAMLParser;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.apps.StatefulSet;
import io.pagewire.node.NodeContext;
import io.pagewire.node.NodeSettings;
import io.pagewire.node.security.SecurityContext;
import io.pagewire.node.security.TestbedCertificates;
import java.nio.file.Files;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * deploy/k8s read with Kubernetes' own object model and held against the node: the ports the
 * Service, the probes and the scrape annotations name are the ones the node listens on, every
 * PAGEWIRE_ variable is a setting the node knows with a value it accepts, and the peer list names
 * exactly the StatefulSet's pods through its headless Service.
 */
class DeployManifestsTest {
    private static final Path MANIFEST = Path.of(System.getProperty("pagewire.repository.root", "../.."), "deploy/k8s/pagewire.yaml");
    private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory()).configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true);

    private static List<JsonNode> documents() throws IOException {
        List<JsonNode> documents = new ArrayList<>();
        try (YAMLParser parser = new YAMLFactory().createParser(MANIFEST.toFile())) {
            for (var it = YAML.readValues(parser, JsonNode.class); it.hasNext(); ) {
                documents.add(it.next());
            }
        }
        return documents;
    }

    private static <T> T one(List<JsonNode> documents, String kind, Class<T> type) throws IOException {
        List<JsonNode> found = documents.stream().filter(d -> kind.equals(d.path("kind").asText())).toList();
        assertThat(found).as("one " + kind + " in " + MANIFEST).hasSize(1);
        return YAML.treeToValue(found.get(0), type);
    }

    @Test
    void theManifestsMatchTheNodesPortsProbesAndSettings() throws IOException {
        List<JsonNode> documents = documents();
        StatefulSet set = one(documents, "StatefulSet", StatefulSet.class);
        Service service = one(documents, "Service", Service.class);
        NodeContext defaults = new NodeContext();

        assertThat(service.getSpec().getClusterIP()).as("the Service is headless, for peer discovery").isEqualTo("None");
        assertThat(set.getSpec().getServiceName()).isEqualTo(service.getMetadata().getName());
        assertThat(service.getSpec().getSelector()).isEqualTo(set.getSpec().getSelector().getMatchLabels());

        Container node = set.getSpec().getTemplate().getSpec().getContainers().get(0);
        Map<String, Integer> ports = new LinkedHashMap<>();
        node.getPorts().forEach(p -> ports.put(p.getName(), p.getContainerPort()));
        Map<String, String> env = new LinkedHashMap<>();
        for (EnvVar var : node.getEnv()) {
            env.put(var.getName(), var.getValue());
        }
        Map<String, String> settings = NodeSettings.fromEnvironment(env);
        assertThat(settings.keySet()).as("every PAGEWIRE_ variable is a node setting")
                .hasSize((int) env.keySet().stream().filter(k -> k.startsWith("PAGEWIRE_")).count());
        NodeContext configured = new NodeContext().nodeId("pagewire-0");
        NodeSettings.apply(configured, withoutId(settings), "deploy/k8s/pagewire.yaml");
        // The Secret the manifest mounts, made as its header says.
        Path certs = Files.createTempDirectory("pagewire-k8s-certs-");
        TestbedCertificates.in(certs).issueNode("pagewire-0", List.of());
        String mounted = settings.get(SecurityContext.CERTIFICATE_DIRECTORY_PROP_NAME);
        assertThat(node.getVolumeMounts()).as("the certificate directory is the Secret's mount")
                .anySatisfy(m -> assertThat(m.getMountPath()).isEqualTo(mounted));
        configured.security().certificateDirectory(certs);
        configured.conclude();
        assertThat(configured.security().mutualTls()).as("the nodes speak mutual TLS").isTrue();

        assertThat(ports).containsEntry("verbs", configured.port()).containsEntry("metrics", configured.metricsPort());
        assertThat(configured.port()).isEqualTo(defaults.port());
        service.getSpec().getPorts().forEach(p -> assertThat(ports).as("Service port " + p.getName()).containsEntry(p.getName(), p.getPort()));
        for (var probe : List.of(node.getReadinessProbe(), node.getLivenessProbe())) {
            assertThat(probe.getExec().getCommand()).as("probes run `pagewire health` against the node's port (over its TLS)")
                    .contains("health", "localhost:" + configured.port());
        }
        Map<String, String> annotations = set.getSpec().getTemplate().getMetadata().getAnnotations();
        assertThat(annotations).containsEntry("prometheus.io/scrape", "true")
                .containsEntry("prometheus.io/port", String.valueOf(configured.metricsPort())).containsEntry("prometheus.io/path", "/metrics");

        EnvVar id = node.getEnv().stream().filter(v -> v.getName().equals(NodeSettings.environmentName(NodeSettings.NODE_ID))).findFirst().orElseThrow();
        assertThat(id.getValueFrom().getFieldRef().getFieldPath()).as("each pod's node id is its name").isEqualTo("metadata.name");
        List<String> expectedPeers = new ArrayList<>();
        for (int i = 0; i < set.getSpec().getReplicas(); i++) {
            String pod = set.getMetadata().getName() + "-" + i;
            expectedPeers.add(pod + "=" + pod + "." + service.getMetadata().getName() + ":" + configured.port());
        }
        assertThat(env.get(NodeSettings.environmentName(NodeSettings.NODE_PEERS))).as("the peers are the StatefulSet's pods")
                .isEqualTo(String.join(",", expectedPeers));

        long heapBytes = (long) (node.getResources().getLimits().get("memory").getNumericalAmount().longValue() * 0.75);
        assertThat(configured.kernel().physicalMemoryBytes()).as("the emulated memory fits in the heap the memory limit leaves")
                .isLessThan(heapBytes - (128L << 20));
        assertThat(node.getVolumeMounts()).anySatisfy(m -> assertThat(settings.get("pagewire.kernel.swapFile")).startsWith(m.getMountPath()));
        assertThat(set.getSpec().getTemplate().getSpec().getVolumes()).anySatisfy(v -> assertThat(v.getSecret()).isNotNull());
    }

    private static Map<String, String> withoutId(Map<String, String> settings) {
        Map<String, String> copy = new LinkedHashMap<>(settings);
        copy.remove(NodeSettings.NODE_ID);
        return copy;
    }
}
