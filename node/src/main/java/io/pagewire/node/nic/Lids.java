package io.pagewire.node.nic;

import java.nio.charset.StandardCharsets;
import java.util.zip.CRC32;

/**
 * A node's port addresses: its LID, the 16-bit address verbs programs exchange to connect queue pairs
 * (a function of the node's id, so every node computes every peer's without asking, in the unicast
 * range 1..0xBFFF), and its port GID (the link-local prefix and a GUID made from the LID), as the
 * verbs library reports them and a UD receive's GRH carries them.
 */
public final class Lids {
    /** Unicast LIDs are 0x0001..0xBFFF (0xC000 and up are multicast, 0xFFFF permissive). */
    private static final int UNICAST_LIDS = 0xBFFF;

    private Lids() {
    }

    /** The first multicast LID; 0xFFFF (permissive) is no group's. */
    public static final int FIRST_MULTICAST = 0xC000;

    /** Whether {@code lid} names a multicast group (0xC000 to 0xFFFE). */
    public static boolean isMulticast(int lid) {
        return lid >= FIRST_MULTICAST && lid < 0xFFFF;
    }

    public static int of(String nodeId) {
        CRC32 crc = new CRC32();
        crc.update(nodeId.getBytes(StandardCharsets.UTF_8));
        return 1 + (int) (crc.getValue() % UNICAST_LIDS);
    }

    /** The node's port GUID, as the verbs library's ibv_query_device gives it. */
    public static long guid(String nodeId) {
        return 0x0250_5700_0000_0000L | of(nodeId);
    }

    /** Writes the node's port GID (fe80::/64 and its GUID, network order) into {@code to} at {@code at}. */
    public static void gid(String nodeId, byte[] to, int at) {
        java.util.Arrays.fill(to, at, at + 16, (byte) 0);
        to[at] = (byte) 0xfe;
        to[at + 1] = (byte) 0x80;
        long guid = guid(nodeId);
        for (int i = 0; i < 8; i++) {
            to[at + 8 + i] = (byte) (guid >>> (56 - 8 * i));
        }
    }
}
