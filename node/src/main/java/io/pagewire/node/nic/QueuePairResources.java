package io.pagewire.node.nic;

import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * What a queue pair and its two halves use beyond the NIC's services, built once by the NIC: the wire,
 * the regions and windows peers' keys name, the faults raised for peers' requests, what a responder
 * answers a request that meets one, the acknowledgement-timeout sweep to arm, and where a pair says it
 * closed.
 */
record QueuePairResources(NicServices services, Wire wire, Regions regions, ResponderFaults responderFaults, Supplier<FaultAnswer> faultAnswer,
        Runnable armSweep, Consumer<QueuePair> closed) {
}
