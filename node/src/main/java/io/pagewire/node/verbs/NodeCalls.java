package io.pagewire.node.verbs;

import com.google.protobuf.ByteString;
import io.grpc.stub.StreamObserver;
import io.pagewire.node.fabric.Fabric;
import io.pagewire.node.metrics.ProcessCpu;
import io.pagewire.node.nic.Endpoint;
import io.pagewire.node.nic.Lids;
import io.pagewire.node.nic.MemoryRegion;
import io.pagewire.node.nic.Nic;
import io.pagewire.node.nic.RegionCounters;
import io.pagewire.proto.verbs.DescribeNodeRequest;
import io.pagewire.proto.verbs.DescribeNodeResponse;
import io.pagewire.proto.verbs.ReadRegionStatsRequest;
import io.pagewire.proto.verbs.ReadStatsRequest;
import io.pagewire.proto.verbs.ReadStatsResponse;
import io.pagewire.proto.verbs.RegionStats;
import io.pagewire.proto.verbs.RegistrationMode;
import io.pagewire.proto.verbs.Stat;
import java.util.List;
import java.util.function.Supplier;

/** The calls about the node itself: what it is (its page size, MTU, peers) and what its meters and regions say. */
final class NodeCalls {
    private final String nodeId;
    private final Nic nic;
    private final Fabric fabric;
    private final Sessions sessions;
    private final Supplier<List<Stat>> stats;
    private final ByteString address;

    NodeCalls(String nodeId, Nic nic, Fabric fabric, Sessions sessions, Supplier<List<Stat>> stats, byte[] address) {
        this.nodeId = nodeId;
        this.address = ByteString.copyFrom(address);
        this.nic = nic;
        this.fabric = fabric;
        this.sessions = sessions;
        this.stats = stats;
    }

    void describeNode(DescribeNodeRequest request, StreamObserver<DescribeNodeResponse> response) {
        ControlCalls.answer(response, () -> DescribeNodeResponse.newBuilder()
                .setNodeId(nodeId)
                .setPageSize(nic.kernel().memory().pageSize())
                .setMtu(nic.context().mtuBytes())
                .addAllPeers(fabric.links().keySet())
                .setPhysicalMemoryBytes(nic.kernel().context().physicalMemoryBytes())
                .setProcessCpuNs(ProcessCpu.nanos())
                .setLid(Lids.of(nodeId))
                .putAllPeerLids(fabric.links().keySet().stream().collect(java.util.stream.Collectors.toMap(p -> p, Lids::of)))
                .setInitialCredits(nic.firstCredits())
                .setAddress(address)
                .build());
    }

    void readStats(ReadStatsRequest request, StreamObserver<ReadStatsResponse> response) {
        ControlCalls.answer(response, () -> {
            ReadStatsResponse.Builder answer = ReadStatsResponse.newBuilder().setNodeId(nodeId).addAllStats(stats.get());
            if (request.getRegions()) {
                for (Endpoint endpoint : nic.endpoints()) {
                    for (MemoryRegion region : endpoint.regions()) {
                        answer.addRegions(regionStats(region));
                    }
                }
            }
            return answer.build();
        });
    }

    void readRegionStats(ReadRegionStatsRequest request, StreamObserver<RegionStats> response) {
        ControlCalls.answer(response, () -> regionStats(sessions.get(request.getEndpoint()).region(request.getLkey())));
    }

    private static RegionStats regionStats(MemoryRegion region) {
        RegionCounters c = region.counters();
        return RegionStats.newBuilder().setEndpointId(region.endpoint().id()).setLkey(region.lkey()).setAddress(region.address())
                .setLength(region.implicit() ? 0 : region.length()).setMode(RegistrationMode.valueOf(region.mode().name()))
                .setMinorFaults(c.minorFaults()).setMajorFaults(c.majorFaults()).setInvalidations(c.invalidations())
                .setPrefetchedPages(c.prefetchedPages()).setPins(c.pins()).setBytesReceived(c.bytesReceived()).setBytesSent(c.bytesSent()).build();
    }
}
