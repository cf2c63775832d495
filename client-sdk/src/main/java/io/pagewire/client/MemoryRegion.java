package io.pagewire.client;

import java.util.Set;
import java.util.concurrent.CompletableFuture;

/** Memory registered with the NIC. Closing it deregisters it: pins go, the keys stop working. */
public interface MemoryRegion extends AutoCloseable {
    long address();

    long length();

    RegistrationMode mode();

    Set<Access> access();

    /** The key local work requests name this region by. */
    int lkey();

    /** The key peers name this region by. */
    long rkey();

    /** What a peer needs to reach this region. */
    default RemoteRegion remote() {
        return new RemoteRegion(address(), length(), rkey());
    }

    /** Prefetches [address, address + length) of the region; returns when done. */
    void advise(Advice advice, long address, long length);

    CompletableFuture<Void> adviseAsync(Advice advice, long address, long length);

    /** The region's counters now, as its node keeps them: faults, invalidations, prefetches, pins, bytes. */
    RegionStats stats();

    @Override
    void close();
}
