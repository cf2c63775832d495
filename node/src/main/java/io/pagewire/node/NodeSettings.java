package io.pagewire.node;

import io.pagewire.config.Setting;
import io.pagewire.kernel.KernelConfiguration;
import io.pagewire.node.fabric.FabricConfiguration;
import io.pagewire.node.nic.NicConfiguration;
import io.pagewire.node.security.SecurityConfiguration;
import io.pagewire.node.verbs.VerbsConfiguration;
import java.io.IOException;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;

/**
 * Every setting of a node, read off the descriptors its parts declare, and how written values land in
 * a {@link NodeContext}. Settings come from a properties file, the environment
 * ({@code PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES} for {@code pagewire.kernel.physicalMemoryBytes}) and the
 * command line, later sources overriding earlier ones. Sizes take units ({@code 256MiB}), times too
 * ({@code 200ms}). {@link #reference()} is the configuration reference the docs carry.
 */
public final class NodeSettings {
    /**
     * Variables of the SDK, the command's client side and the C verbs library that share the {@code PAGEWIRE_} prefix: a
     * node ignores them (a container's health probe reads the same environment as its node).
     */
    public static final Set<String> CLIENT_VARIABLES = Set.of("PAGEWIRE_JAVA_OPTS", "PAGEWIRE_SECURITY_IDENTITY",
            "PAGEWIRE_SECURITY_SERVER_NAME", "PAGEWIRE_NODE", "PAGEWIRE_VERBS_SOCKET", "PAGEWIRE_VERBS_RING_DIRECTORY",
            "PAGEWIRE_VERBS_REGISTRATION", "PAGEWIRE_VERBS_LOG", "PAGEWIRE_VERBS_SPIN_US", "PAGEWIRE_VERBS_SLEEP_AFTER_US",
            "PAGEWIRE_VERBS_SLEEP_AFTER_MAX_US", "PAGEWIRE_VERBS_SLEEP_US", "PAGEWIRE_VERBS_LIBRARY", "PAGEWIRE_VERBS_HOP_TRACE",
            "PAGEWIRE_VERBS_HOP_TRACE_EVENTS");

    /** The settings of each part of a node, in the order the reference shows them. */
    private static final Map<String, List<Setting<?>>> SECTIONS = sections();
    /** Every setting by name. */
    private static final Map<String, Setting<?>> BY_NAME = byName();

    private NodeSettings() {
    }

    private static Map<String, List<Setting<?>>> sections() {
        Map<String, List<Setting<?>>> sections = new LinkedHashMap<>();
        sections.put("Node", NodeConfiguration.SETTINGS);
        sections.put("Kernel agent", KernelConfiguration.SETTINGS);
        sections.put("NIC and its quotas", NicConfiguration.SETTINGS);
        sections.put("Fabric and fault injection", FabricConfiguration.SETTINGS);
        sections.put("Verbs service, sessions and rings", VerbsConfiguration.SETTINGS);
        sections.put("Security", SecurityConfiguration.SETTINGS);
        return Collections.unmodifiableMap(sections);
    }

    private static Map<String, Setting<?>> byName() {
        Map<String, Setting<?>> all = new TreeMap<>();
        SECTIONS.values().forEach(list -> list.forEach(setting -> {
            if (all.put(setting.name(), setting) != null) {
                throw new IllegalStateException("two settings are called " + setting.name());
            }
        }));
        return Collections.unmodifiableMap(all);
    }

    /** Every setting's name, sorted. */
    public static Set<String> names() {
        return BY_NAME.keySet();
    }

    /** Every setting, sorted by name. */
    public static List<Setting<?>> all() {
        return List.copyOf(BY_NAME.values());
    }

    /** The setting of that name, or null. */
    public static Setting<?> setting(String name) {
        return BY_NAME.get(name);
    }

    /** The environment variable for a setting: {@code pagewire.kernel.physicalMemoryBytes} is {@code PAGEWIRE_KERNEL_PHYSICAL_MEMORY_BYTES}. */
    public static String environmentName(String name) {
        return Setting.environmentName(name);
    }

    /** Settings found in the environment, by name; an unknown {@code PAGEWIRE_} variable is an error. */
    public static Map<String, String> fromEnvironment(Map<String, String> environment) {
        Map<String, String> byEnvironmentName = new TreeMap<>();
        for (Setting<?> setting : BY_NAME.values()) {
            byEnvironmentName.put(setting.environmentName(), setting.name());
        }
        Map<String, String> settings = new LinkedHashMap<>();
        for (Map.Entry<String, String> e : new TreeMap<>(environment).entrySet()) {
            if (!e.getKey().startsWith("PAGEWIRE_") || CLIENT_VARIABLES.contains(e.getKey())) {
                continue;
            }
            String name = byEnvironmentName.get(e.getKey());
            if (name == null) {
                throw new IllegalArgumentException("unknown setting in the environment: " + e.getKey()
                        + "; settings are the PAGEWIRE_ forms of " + BY_NAME.keySet());
            }
            settings.put(name, e.getValue());
        }
        return settings;
    }

    /** Settings from a properties file. */
    public static Map<String, String> fromFile(Path file) {
        Properties properties = new Properties();
        try (Reader reader = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            properties.load(reader);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read configuration file " + file + ": " + e.getMessage());
        }
        Map<String, String> settings = new LinkedHashMap<>();
        for (String name : new TreeMap<>(properties).keySet().stream().map(Object::toString).toList()) {
            settings.put(name, properties.getProperty(name));
        }
        return settings;
    }

    /** Applies written settings to a context; an unknown name or an unparsable value is an error naming it. */
    public static void apply(NodeContext context, Map<String, String> settings, String source) {
        for (Map.Entry<String, String> written : settings.entrySet()) {
            Setting<?> setting = BY_NAME.get(written.getKey());
            if (setting == null) {
                throw new IllegalArgumentException("unknown setting " + written.getKey() + " (from " + source + "); known settings: "
                        + BY_NAME.keySet());
            }
            context.settingsOf(setting).setText(setting, written.getValue());
        }
    }

    /** The configuration reference page, {@code docs/configuration.md}: a short introduction, then {@link #reference()}. */
    public static String referencePage() {
        return "# Configuration\n\n"
                + "<!-- Generated from the settings' declarations: ./pagewire node --settings-reference > docs/configuration.md -->\n\n"
                + "A node's settings come, later ones winning, from a properties file (`pagewire node --config FILE`), the environment\n"
                + "(each setting's variable below), `--set name=value` and the command's named flags. Sizes take units (`256MiB`),\n"
                + "times too (`200ms`); a bad value stops the node with the setting's name and what it accepts.\n"
                + "Each setting is declared once, in its component's `*Configuration` class.\n\n"
                + reference();
    }

    /** The configuration reference: every setting by part, with its environment variable, type, default and what it does. */
    public static String reference() {
        StringBuilder out = new StringBuilder();
        for (Map.Entry<String, List<Setting<?>>> section : SECTIONS.entrySet()) {
            out.append("## ").append(section.getKey()).append("\n\n");
            out.append("| setting | environment | type | default | what it does |\n|---|---|---|---|---|\n");
            List<Setting<?>> sorted = new ArrayList<>(section.getValue());
            sorted.sort(Comparator.comparing(Setting::name));
            for (Setting<?> setting : sorted) {
                out.append("| `").append(setting.name()).append("` | `").append(setting.environmentName()).append("` | ")
                        .append(setting.type().name().replace("|", "\\|")).append(" | ")
                        .append(setting.formattedDefault().isEmpty() ? "" : "`" + setting.formattedDefault() + "`").append(" | ")
                        .append(setting.doc().replace("|", "\\|")).append(" |\n");
            }
            out.append('\n');
        }
        return out.toString();
    }
}
