package io.pagewire.node.nic;

import java.util.function.Consumer;

/**
 * What an endpoint uses beyond the NIC's services, built once by the NIC: the regions and windows it
 * registers (and their keys), the translations it drops when they go, the node's work-request count, and
 * where it says it closed.
 */
record EndpointResources(NicServices services, Regions regions, Translations translations, WorkRequests workRequests,
        Consumer<Endpoint> closed) {
}
