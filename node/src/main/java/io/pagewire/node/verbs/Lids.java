package io.pagewire.node.verbs;

import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;

/**
 * A node's LID, the 16-bit port address verbs programs exchange to connect queue pairs: a function of
 * the node's id, so every node computes every peer's without asking, in the unicast range 1..0xBFFF.
 */
public final class Lids {
    /** Unicast LIDs are 0x0001..0xBFFF (0xC000 and up are multicast, 0xFFFF permissive). */
    private static final int UNICAST_LIDS = 0xBFFF;

    private Lids() {
    }

    public static int of(String nodeId) {
        CRC32 crc = new CRC32();
        crc.update(nodeId.getBytes(StandardCharsets.UTF_8));
        return 1 + (int) (crc.getValue() % UNICAST_LIDS);
    }
}
