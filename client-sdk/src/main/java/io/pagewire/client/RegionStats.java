package io.pagewire.client;

/**
 * What happened to one memory region, after {@code rdma stat mr}: the NIC's page faults on it, the
 * translations of it the kernel made the NIC drop, pages prefetched and pinned for it, and the bytes
 * placed in it and gathered from it (first transmissions).
 *
 * @param endpointId the endpoint that registered it, on its node
 * @param length its bytes; 0 for an implicit (whole address space) ON_DEMAND region
 */
public record RegionStats(int endpointId, int lkey, long address, long length, RegistrationMode mode, long minorFaults, long majorFaults,
        long invalidations, long prefetchedPages, long pins, long bytesReceived, long bytesSent) {
}
