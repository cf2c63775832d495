package io.pagewire.node;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** docs/configuration.md is what the settings' declarations say now: a setting added or changed without the page fails here. */
class ConfigurationReferenceTest {
    private static final Path PAGE = Path.of(System.getProperty("pagewire.repository.root", ".."), "docs/configuration.md");

    @Test
    void theConfigurationPageIsGeneratedFromTheDeclarations() throws IOException {
        assertThat(Files.readString(PAGE)).as(PAGE + " is out of date; regenerate it with ./pagewire node --settings-reference > docs/configuration.md")
                .isEqualTo(NodeSettings.referencePage());
        for (var setting : NodeSettings.all()) {
            assertThat(setting.doc()).as(setting.name() + "'s doc").isNotBlank().doesNotContain("\n");
        }
    }
}
