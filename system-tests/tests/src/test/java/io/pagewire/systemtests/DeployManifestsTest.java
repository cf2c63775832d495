package io.pagewire.systemtests;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.dataformat.yaml.YAMLFactory;
import com.fasterxml.jackson.dataformat.yaml.YAMLParser;
import io.fabric8.kubernetes.api.model.Container;
import io.fabric8.kubernetes.api.model.EnvVar;
import io.fabric8.kubernetes.api.model.KeyToPath;
import io.fabric8.kubernetes.api.model.Service;
import io.fabric8.kubernetes.api.model.Volume;
import io.fabric8.kubernetes.api.model.apps.StatefulSet;
import io.pagewire.node.NodeConfiguration;
import io.pagewire.node.NodeContext;
import io.pagewire.node.NodeSettings;
import io.pagewire.node.security.SecurityConfiguration;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * deploy/k8s read with Kubernetes' own object model and held against the node: the ports the
 * Service, the probes and the scrape annotations name are the ones the node listens on, every
 * PAGEWIRE_ variable is a setting the node knows with a value it accepts, and the peer list names
 * exactly the StatefulSet's pods through its headless Service.
 */
class DeployManifestsTest {
    private static final Path MANIFEST = Path.of(System.getProperty("pagewire.repository.root", "../.."), "deploy/k8s/pagewire.yaml");
    private static final ObjectMapper YAML = new ObjectMapper(new YAMLFactory()).configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, true);

    @TempDir
    Path temporary;

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
        String mounted = settings.get(SecurityConfiguration.CERTIFICATE_DIRECTORY.name());
        assertThat(node.getVolumeMounts()).as("the certificate directory is the Secret's mount")
                .anySatisfy(m -> assertThat(m.getMountPath()).isEqualTo(mounted));
        mountedAsInAPod(configured, settings, podsCertificates(set, "pagewire-0"));
        configured.conclude();
        assertThat(configured.security().mutualTls()).as("the nodes speak mutual TLS").isTrue();
        assertThat(configured.security().metricsToken()).as("/metrics asks for the Secret's token").isNotBlank();

        assertThat(ports).containsEntry("verbs", configured.port()).containsEntry("metrics", configured.metricsPort());
        assertThat(configured.port()).isEqualTo(defaults.port());
        service.getSpec().getPorts().forEach(p -> assertThat(ports).as("Service port " + p.getName()).containsEntry(p.getName(), p.getPort()));
        for (var probe : List.of(node.getReadinessProbe(), node.getLivenessProbe())) {
            assertThat(probe.getExec().getCommand()).as("probes read the node's health file with the image's script (no JVM per probe)")
                    .containsExactly("/usr/lib/pagewire/pagewire-health");
        }
        Map<String, String> annotations = set.getSpec().getTemplate().getMetadata().getAnnotations();
        assertThat(annotations).containsEntry("prometheus.io/scrape", "true")
                .containsEntry("prometheus.io/port", String.valueOf(configured.metricsPort())).containsEntry("prometheus.io/path", "/metrics");

        EnvVar id = node.getEnv().stream().filter(v -> v.getName().equals(NodeSettings.environmentName(NodeConfiguration.ID.name()))).findFirst().orElseThrow();
        assertThat(id.getValueFrom().getFieldRef().getFieldPath()).as("each pod's node id is its name").isEqualTo("metadata.name");
        List<String> expectedPeers = new ArrayList<>();
        for (int i = 0; i < set.getSpec().getReplicas(); i++) {
            String pod = set.getMetadata().getName() + "-" + i;
            expectedPeers.add(pod + "=" + pod + "." + service.getMetadata().getName() + ":" + configured.port());
        }
        assertThat(env.get(NodeSettings.environmentName(NodeConfiguration.PEERS.name()))).as("the peers are the StatefulSet's pods")
                .isEqualTo(String.join(",", expectedPeers));

        // The emulated memory is a file in the ring directory, which the manifest puts in RAM (tmpfs pages
        // count against the memory limit), beside the heap the image's JVM takes of the limit.
        long limit = node.getResources().getLimits().get("memory").getNumericalAmount().longValue();
        Matcher heapShare = Pattern.compile("MaxRAMPercentage=(\\d+)").matcher(Files.readString(MANIFEST.resolveSibling("../../Dockerfile")));
        assertThat(heapShare.find()).as("the image's entry point sizes the heap").isTrue();
        long heapBytes = limit * Long.parseLong(heapShare.group(1)) / 100;
        assertThat(heapBytes + configured.kernel().physicalMemoryBytes()).as("the heap and the emulated memory fit the memory limit")
                .isLessThan(limit - (128L << 20));
        String ringDirectory = env.getOrDefault(NodeSettings.environmentName("pagewire.node.ringDirectory"), "/var/lib/pagewire/rings");
        Volume rings = set.getSpec().getTemplate().getSpec().getVolumes().stream().filter(v -> v.getEmptyDir() != null
                && node.getVolumeMounts().stream().anyMatch(m -> m.getName().equals(v.getName()) && m.getMountPath().equals(ringDirectory)))
                .findFirst().orElseThrow(() -> new AssertionError("no emptyDir volume at the ring directory " + ringDirectory));
        assertThat(rings.getEmptyDir().getMedium()).as("the node's memory file is in RAM").isEqualTo("Memory");
        assertThat(rings.getEmptyDir().getSizeLimit().getNumericalAmount().longValue()).as("the ring volume holds the memory file")
                .isGreaterThanOrEqualTo(configured.kernel().physicalMemoryBytes());
        assertThat(node.getVolumeMounts()).anySatisfy(m -> assertThat(settings.get("pagewire.kernel.swapFile")).startsWith(m.getMountPath()));
    }

    /**
     * UCX takes a device only when /dev/infiniband/uverbsN is a character device it may read and
     * write: a root init container with CAP_MKNOD alone runs the image's script into a volume the
     * node mounts there, read-only; the node itself stays non-root.
     */
    @Test
    void eachPodGetsTheDeviceFilesUcxLooksFor() throws IOException {
        StatefulSet set = one(documents(), "StatefulSet", StatefulSet.class);
        var pod = set.getSpec().getTemplate().getSpec();
        Container node = pod.getContainers().get(0);
        assertThat(pod.getInitContainers()).as("one init container makes the device files").hasSize(1);
        Container init = pod.getInitContainers().get(0);
        String script = "/usr/lib/pagewire/uverbs-device-files.sh";
        assertThat(init.getCommand()).as("null devices: a pod may not access any other").containsExactly(script, "--null");
        assertThat(Files.readString(MANIFEST.resolveSibling("../../Dockerfile"))).as("the image carries the script")
                .contains("COPY deploy/uverbs-device-files.sh " + script);
        assertThat(init.getImage()).isEqualTo(node.getImage());
        assertThat(init.getSecurityContext().getRunAsUser()).as("mknod needs root").isZero();
        assertThat(init.getSecurityContext().getCapabilities().getAdd()).containsExactly("MKNOD");
        assertThat(init.getSecurityContext().getCapabilities().getDrop()).containsExactly("ALL");
        assertThat(pod.getSecurityContext().getRunAsUser()).as("the node runs as the image's user").isEqualTo(7100L);
        var made = init.getVolumeMounts().stream().filter(m -> m.getMountPath().equals("/dev/infiniband")).findFirst()
                .orElseThrow(() -> new AssertionError("the init container has no volume at /dev/infiniband"));
        assertThat(pod.getVolumes()).anySatisfy(v -> {
            assertThat(v.getName()).isEqualTo(made.getName());
            assertThat(v.getEmptyDir()).isNotNull();
        });
        assertThat(node.getVolumeMounts()).as("the node sees the files at /dev/infiniband, read-only").anySatisfy(m -> {
            assertThat(m.getName()).isEqualTo(made.getName());
            assertThat(m.getMountPath()).isEqualTo("/dev/infiniband");
            assertThat(m.getReadOnly()).isTrue();
        });
    }

    /**
     * The Secret made as the manifest's header says ({@code pagewire certs}, then {@code kubectl create
     * secret generic} with the header's files, named as --from-file names them), mounted as the
     * StatefulSet's volume mounts it: every file each pod's node reads is there, and neither the
     * CA's private key nor an application's key ever is.
     */
    @Test
    void theSecretHoldsWhatEachPodReadsAndNeverTheCasKey() throws IOException {
        List<JsonNode> documents = documents();
        assertThat(documents).as("the Secret is made from `pagewire certs`, not declared empty in the manifest")
                .noneMatch(d -> "Secret".equals(d.path("kind").asText()));
        StatefulSet set = one(documents, "StatefulSet", StatefulSet.class);
        Container node = set.getSpec().getTemplate().getSpec().getContainers().get(0);
        Map<String, String> env = new LinkedHashMap<>();
        node.getEnv().forEach(v -> env.put(v.getName(), v.getValue()));
        Map<String, String> settings = NodeSettings.fromEnvironment(env);
        for (int i = 0; i < set.getSpec().getReplicas(); i++) {
            String pod = set.getMetadata().getName() + "-" + i;
            Path mounted = podsCertificates(set, pod);
            try (var files = Files.list(mounted)) {
                assertThat(files.map(f -> f.getFileName().toString()).toList()).as("what %s sees", pod)
                        .doesNotContain("ca.key", "app.key").contains("ca.pem", pod + ".pem", pod + ".key", "metrics.token");
            }
            NodeContext context = new NodeContext().nodeId(pod);
            NodeSettings.apply(context, withoutId(settings), "deploy/k8s/pagewire.yaml");
            mountedAsInAPod(context, settings, mounted);
            context.conclude();
            assertThat(context.security().mutualTls()).as(pod + " speaks mutual TLS").isTrue();
            assertThat(context.security().metricsToken()).as(pod + "'s metrics token").isEqualTo(Files.readString(mounted.resolve("metrics.token")).trim());
        }
    }

    /**
     * Points a node's certificate directory and metrics token file, which the manifest names under the
     * Secret's mount, at the same files in {@code mounted}, the test's stand-in for the mount.
     */
    private static void mountedAsInAPod(NodeContext context, Map<String, String> settings, Path mounted) {
        String mountPath = settings.get(SecurityConfiguration.CERTIFICATE_DIRECTORY.name());
        String tokenFile = settings.get(SecurityConfiguration.METRICS_TOKEN_FILE.name());
        assertThat(tokenFile).as("the metrics token is read from the Secret").startsWith(mountPath + "/");
        context.security().certificateDirectory(mounted).metricsTokenFile(mounted.resolve(tokenFile.substring(mountPath.length() + 1)));
    }

    /** The files the command in the manifest's header puts in the Secret: each --from-file's name. */
    private static List<String> secretFilesFromTheHeader() throws IOException {
        List<String> files = new ArrayList<>();
        Matcher fromFile = Pattern.compile("--from-file=certs/(\\S+)").matcher(Files.readString(MANIFEST));
        while (fromFile.find()) {
            files.add(fromFile.group(1));
        }
        assertThat(files).as("the header says how to make the Secret").isNotEmpty();
        return files;
    }

    /**
     * A pod's certificate directory: `pagewire certs` for every pod of the set (and its default
     * application) in a directory, the Secret made of the files the header names, and of those what
     * the volume's items project; a missing key fails as the kubelet would.
     */
    private Path podsCertificates(StatefulSet set, String pod) throws IOException {
        Path issued = Files.createTempDirectory(temporary, "issued-");
        TestbedCertificates ca = TestbedCertificates.in(issued);
        for (int i = 0; i < set.getSpec().getReplicas(); i++) {
            ca.issueNode(set.getMetadata().getName() + "-" + i, List.of());
        }
        ca.issueApplication("app");
        ca.metricsToken();
        List<String> secret = secretFilesFromTheHeader();
        Volume volume = set.getSpec().getTemplate().getSpec().getVolumes().stream().filter(v -> v.getSecret() != null).findFirst()
                .orElseThrow(() -> new AssertionError("the StatefulSet mounts no Secret"));
        Path mounted = Files.createTempDirectory(temporary, pod + "-");
        for (KeyToPath item : volume.getSecret().getItems()) {
            assertThat(secret).as("the Secret the header makes has " + item.getKey()).contains(item.getKey());
            Files.copy(issued.resolve(item.getKey()), mounted.resolve(item.getPath()));
        }
        return mounted;
    }

    private static Map<String, String> withoutId(Map<String, String> settings) {
        Map<String, String> copy = new LinkedHashMap<>(settings);
        copy.remove(NodeConfiguration.ID.name());
        return copy;
    }
}
