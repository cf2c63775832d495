package io.pagewire.ring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The ring file both sides map: its header, its two rings, and the sleeping-agent flags behind the doorbell. */
class SessionRingsTest {
    @TempDir
    Path dir;

    @Test
    void bothSidesSeeTheSameHeaderAndRings() throws Exception {
        Path file = dir.resolve("s.rings");
        SessionRings node = SessionRings.create(file, 4096, 0x1234_5678_9abcL);
        SessionRings app = SessionRings.open(file);
        assertThat(app.nonce()).isEqualTo(0x1234_5678_9abcL);
        org.agrona.concurrent.UnsafeBuffer record = new org.agrona.concurrent.UnsafeBuffer(new byte[16]);
        record.putLong(0, 42);
        assertThat(app.requests().write(PostRecord.TYPE, record, 0, 8)).isTrue();
        long[] seen = new long[1];
        assertThat(node.requests().read((type, buffer, offset, length) -> seen[0] = buffer.getLong(offset))).isEqualTo(1);
        assertThat(seen[0]).isEqualTo(42);
        node.deleteFile();
        assertThat(Files.exists(file)).isFalse();
    }

    @Test
    void aSleepingAgentIsRungOnceByOneWriter() throws Exception {
        Path file = dir.resolve("s.rings");
        SessionRings node = SessionRings.create(file, 4096, 1);
        SessionRings app = SessionRings.open(file);
        assertThat(app.takeNodeAsleep()).as("an awake agent needs no doorbell").isFalse();
        node.nodeAsleep(true);
        assertThat(app.takeNodeAsleep()).as("the first writer after it slept rings").isTrue();
        assertThat(app.takeNodeAsleep()).as("later writers do not ring again").isFalse();
        app.appAsleep(true);
        assertThat(node.takeAppAsleep()).isTrue();
        assertThat(node.takeAppAsleep()).isFalse();
    }

    @Test
    void aFileThatIsNotARingFileIsRefused() throws Exception {
        Path file = dir.resolve("other");
        Files.write(file, new byte[8192]);
        assertThatThrownBy(() -> SessionRings.open(file)).hasMessageContaining("is not a Pagewire ring file");
        assertThatThrownBy(() -> SessionRings.create(dir.resolve("small"), 1000, 1)).hasMessageContaining("power of two");
    }
}
