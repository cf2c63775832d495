package io.pagewire.tools.perf;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.within;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The breakdown of a ping-pong read from four hop traces whose every moment is known. */
class HopBreakdownTest {
    /** Each leg's steps, in nanoseconds after its post: ring read, lane send, lane receive, completion, CQ push, poll. */
    private static final long[] LEG = {8_000, 9_000, 25_000, 26_000, 30_000, 30_500};
    private static final long LEG_NS = 40_000;

    @Test
    void eachHopIsTheTimeFromTheStepBeforeOverBothDirections(@TempDir Path dir) throws IOException {
        writePingPong(dir, 100, false);

        HopBreakdown.Result result = HopBreakdown.ofPingPong(dir, 0);

        assertThat(result.matched()).isEqualTo(200);
        assertThat(result.unmatched()).isZero();
        assertThat(result.hops()).extracting(HopBreakdown.Hop::medianUs).containsExactly(8.0, 1.0, 16.0, 1.0, 4.0, 0.5);
        assertThat(result.oneWayMedianUs()).isCloseTo(30.5, within(1e-9));
        assertThat(result.nodeAsleepShare()).isZero();
        // 400,000 bytes over 4 x 100 messages carried: each SEND is posted on one node and received on the other.
        assertThat(result.nodeBytesPerMessage()).isEqualTo(1000.0);
        assertThat(result.table()).contains("allocated 1,000 bytes on the heap per message", "| **one way, post to poll** | **30.5** | **30.5** |", "Over 200 messages");
    }

    @Test
    void theNodesBellAndAReaderThreadsDrainAreCounted(@TempDir Path dir) throws IOException {
        writePingPong(dir, 10, true);

        HopBreakdown.Result result = HopBreakdown.ofPingPong(dir, 0);

        assertThat(result.nodeAsleepShare()).isEqualTo(1.0);
        assertThat(result.drainedElsewhereShare()).isEqualTo(1.0);
    }

    @Test
    void aMessageWhoseStepsDoNotComeBeforeTheNextPostIsLeftOut(@TempDir Path dir) throws IOException {
        writePingPong(dir, 10, false);
        // node-2's program: one more post, which nothing follows.
        Path b = dir.resolve("b.hops");
        Files.writeString(b, Files.readString(b) + (10 * 2 * LEG_NS + LEG_NS + 1_000_000) + " APP_POST_SEND tid-2\n");

        HopBreakdown.Result result = HopBreakdown.ofPingPong(dir, 0);

        assertThat(result.matched()).isEqualTo(20);
        assertThat(result.unmatched()).isEqualTo(1);
    }

    @Test
    void aDirectoryWithoutBothNodesSaysWhatItHolds(@TempDir Path dir) throws IOException {
        writePingPong(dir, 5, false);
        Files.delete(dir.resolve("node-2.hops"));

        assertThatThrownBy(() -> HopBreakdown.ofPingPong(dir, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("programs on [node-1, node-2], nodes [node-1]");
    }

    @Test
    void aFileThatIsNoTraceIsNamed(@TempDir Path dir) throws IOException {
        writePingPong(dir, 5, false);
        Files.writeString(dir.resolve("x.hops"), "hello\n");

        assertThatThrownBy(() -> HopBreakdown.ofPingPong(dir, 0)).isInstanceOf(IllegalArgumentException.class)
                .hasMessageContaining("x.hops is not a hop trace");
    }

    /**
     * {@code count} round trips: program a on node-1 posts at 2k*LEG_NS, program b on node-2 answers at
     * (2k+1)*LEG_NS, each leg's steps at LEG's offsets; {@code asleep}: every post rings its node and every
     * completion is taken from the ring by a reader thread.
     */
    private static void writePingPong(Path dir, int count, boolean asleep) throws IOException {
        List<String> a = new ArrayList<>(List.of("# pagewire hop trace: program ib_send_lat, pid 1, on node node-1; 0 events kept of 0"));
        List<String> b = new ArrayList<>(List.of("# pagewire hop trace: program ib_send_lat, pid 2, on node node-2; 0 events kept of 0"));
        List<String> n1 = new ArrayList<>(List.of("# pagewire hop trace: node node-1, pid 3; 0 events kept of 0",
                "# thread loop allocated " + 1000L * count + " bytes since its first mark"));
        List<String> n2 = new ArrayList<>(List.of("# pagewire hop trace: node node-2, pid 4; 0 events kept of 0",
                "# thread loop allocated " + 3000L * count + " bytes since its first mark"));
        for (int k = 0; k < 2 * count; k++) {
            boolean fromA = k % 2 == 0;
            long t = k * LEG_NS;
            List<String> sender = fromA ? a : b;
            List<String> senderNode = fromA ? n1 : n2;
            List<String> receiverNode = fromA ? n2 : n1;
            List<String> receiver = fromA ? b : a;
            String receiverTid = fromA ? "tid-2" : "tid-1";
            sender.add(t + " APP_POST_SEND " + (fromA ? "tid-1" : "tid-2"));
            if (asleep) {
                sender.add((t + 100) + " APP_RANG_NODE " + (fromA ? "tid-1" : "tid-2"));
            }
            senderNode.add((t + LEG[0]) + " POST_READ loop");
            senderNode.add((t + LEG[1]) + " LANE_SEND_REQUEST loop");
            receiverNode.add((t + LEG[2]) + " LANE_RECEIVE_REQUEST loop");
            receiverNode.add((t + LEG[3]) + " COMPLETION_WRITTEN loop");
            receiver.add((t + LEG[4]) + " APP_CQ_PUSH " + (asleep ? "tid-9" : receiverTid));
            receiver.add((t + LEG[5]) + " APP_POLL_COMPLETION " + receiverTid);
        }
        Files.write(dir.resolve("a.hops"), a);
        Files.write(dir.resolve("b.hops"), b);
        Files.write(dir.resolve("node-1.hops"), n1);
        Files.write(dir.resolve("node-2.hops"), n2);
    }
}
