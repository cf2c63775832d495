package io.pagewire.node.nic;

/**
 * What a peer needs to connect a queue pair to this one, exchanged out of band as with ibverbs: the
 * node, the queue pair number, the receive credits it grants, and its page size (credits count
 * page-sized parts of the responder's memory).
 */
public record QpAddress(String node, int qpn, int initialCredits, int pageSize) {
}
