package io.pagewire.node.fabric;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** Which lane a queue pair's packets take to a peer. */
class PeerLinkTest {
    /**
     * Lanes come up one after another when nodes start: a queue pair whose preferred lane was not up yet
     * takes another and keeps it while it is up, so its packets never take two streams at once (a
     * receiving thread stalled on one stream let the other overtake it, and the responder NAKed a whole
     * window as out of sequence: ReceiveFaultsExperimentTest's PIN_ON_MISS WRITE resent 63 packets).
     */
    @Test
    void aHintKeepsItsLaneWhileThatLaneIsUp() {
        PeerLink link = new PeerLink("node-1", "node-2", 2, null, () -> true); // node-1 sorts first: it prefers the lanes it dialled
        Lane first = new Lane("node-2", 0, Lane.Direction.OUTBOUND, null);
        Lane second = new Lane("node-2", 1, Lane.Direction.OUTBOUND, null);
        link.outbound[0] = first;
        link.outbound[1] = second;
        first.markUp();
        assertThat(link.pick(1)).as("lane 1 is not up yet: hint 1 falls back to lane 0").isSameAs(first);
        second.markUp();
        assertThat(link.pick(1)).as("lane 1 is up now, but hint 1's packets are on lane 0").isSameAs(first);
        assertThat(link.pick(3)).as("the hint's slot, not the hint, keeps the lane").isSameAs(first);
        first.markDown();
        assertThat(link.pick(1)).as("lane 0 went down: hint 1 moves").isSameAs(second);
        first.markUp();
        assertThat(link.pick(1)).isSameAs(second);
        assertThat(link.pick(0)).as("hint 0 took no lane before: its preferred one").isSameAs(first);
    }
}
