package io.pagewire.node.cm;

import io.pagewire.proto.fabric.CmMessage;
import java.util.Collection;

/** How the connection manager reaches its peers' managers, and which peers there are. Called outside the manager's lock. */
public interface CmWire {
    void send(String node, CmMessage message);

    /** The nodes an address query goes to (the linked peers). */
    Collection<String> peers();
}
