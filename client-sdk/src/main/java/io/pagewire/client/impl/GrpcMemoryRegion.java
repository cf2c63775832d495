package io.pagewire.client.impl;

import io.pagewire.client.Access;
import io.pagewire.client.Advice;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.RegionStats;
import io.pagewire.client.RegistrationMode;
import io.pagewire.proto.verbs.AdviseRequest;
import io.pagewire.proto.verbs.AdviseResponse;
import io.pagewire.proto.verbs.DeregisterRegionRequest;
import io.pagewire.proto.verbs.DeregisterRegionResponse;
import io.pagewire.proto.verbs.ReadRegionStatsRequest;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

/** {@link MemoryRegion} over gRPC: the keys and extent the node gave at registration. */
final class GrpcMemoryRegion implements MemoryRegion {
    private final GrpcEndpoint endpoint;
    private final long address;
    private final long length;
    private final RegistrationMode mode;
    private final Set<Access> access;
    private final int lkey;
    private final long rkey;
    private boolean closed;

    GrpcMemoryRegion(GrpcEndpoint endpoint, long address, long length, RegistrationMode mode, Set<Access> access, int lkey, long rkey) {
        this.endpoint = endpoint;
        this.address = address;
        this.length = length;
        this.mode = mode;
        this.access = Set.copyOf(access);
        this.lkey = lkey;
        this.rkey = rkey;
    }

    @Override
    public long address() {
        return address;
    }

    @Override
    public long length() {
        return length;
    }

    @Override
    public RegistrationMode mode() {
        return mode;
    }

    @Override
    public Set<Access> access() {
        return access;
    }

    @Override
    public int lkey() {
        return lkey;
    }

    @Override
    public long rkey() {
        return rkey;
    }

    @Override
    public void advise(Advice advice, long at, long bytes) {
        endpoint.join(adviseAsync(advice, at, bytes));
    }

    @Override
    public CompletableFuture<Void> adviseAsync(Advice advice, long at, long bytes) {
        AdviseRequest request = AdviseRequest.newBuilder().setEndpoint(endpoint.ref()).setLkey(lkey).setAddress(at).setLength(bytes)
                .setAdvice(AdviseRequest.Advice.valueOf(advice.name())).build();
        return Calls.<AdviseResponse>unary(o -> endpoint.connection().stub().advise(request, o)).thenApply(r -> null);
    }

    @Override
    public RegionStats stats() {
        io.pagewire.proto.verbs.RegionStats s = endpoint.join(Calls.<io.pagewire.proto.verbs.RegionStats>unary(o -> endpoint.connection().stub()
                .readRegionStats(ReadRegionStatsRequest.newBuilder().setEndpoint(endpoint.ref()).setLkey(lkey).build(), o)));
        return GrpcPagewire.regionStats(s);
    }

    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        endpoint.join(Calls.<DeregisterRegionResponse>unary(o -> endpoint.connection().stub().deregisterRegion(
                DeregisterRegionRequest.newBuilder().setEndpoint(endpoint.ref()).setLkey(lkey).build(), o)));
    }

    @Override
    public String toString() {
        return String.format("%s region lkey %d rkey 0x%x at 0x%x+%d", mode, lkey, rkey, address, length);
    }
}
