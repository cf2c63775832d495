package io.pagewire.systemtests.fabric;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.protobuf.ByteString;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.ClientResponseObserver;
import io.grpc.stub.StreamObserver;
import io.pagewire.client.Access;
import io.pagewire.client.ClientSecurity;
import io.pagewire.client.Endpoint;
import io.pagewire.client.MemoryRegion;
import io.pagewire.client.Pagewire;
import io.pagewire.client.QpAddress;
import io.pagewire.client.QueuePair;
import io.pagewire.client.RegistrationMode;
import io.pagewire.client.impl.GrpcPagewire;
import io.pagewire.node.PagewireNode;
import io.pagewire.node.Transport;
import io.pagewire.node.nic.NicCounter;
import io.pagewire.proto.fabric.FabricGrpc;
import io.pagewire.proto.fabric.LaneFrame;
import io.pagewire.proto.fabric.LaneHello;
import io.pagewire.proto.fabric.Opcode;
import io.pagewire.proto.fabric.Packet;
import io.pagewire.proto.fabric.PacketBatch;
import io.pagewire.systemtests.LogLines;
import io.pagewire.systemtests.PrintClusterOnFailure;
import io.pagewire.systemtests.ServiceChecks;
import io.pagewire.tools.testbed.EmbeddedCluster;
import io.pagewire.tools.testbed.TestbedCertificates;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.RegisterExtension;

/**
 * A connected, authenticated peer that sends garbage: 50,000 fuzzed packet batches (every field drawn
 * from the values that break programs, aimed at the victim's real queue pairs, regions and counters
 * as well as at nothing) and, now and then, lane messages that are not protobuf at all. The victim
 * must throw nothing (no batch fails in its NIC), keep reading (the fuzzer's sends never wait long),
 * answer unparsable bytes with a clear status, and serve a well-behaved pair of applications after
 * each phase. The seed is printed; {@code -Dpagewire.fuzz.seed=S -Dpagewire.fuzz.batches=N} replays.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class FabricFuzzTest {
    private static final String FUZZER = "node-3";
    private static final int PHASES = 10;
    private static final MethodDescriptor<byte[], byte[]> RAW_LANE = MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(MethodDescriptor.MethodType.BIDI_STREAMING).setFullMethodName(FabricGrpc.getLaneMethod().getFullMethodName())
            .setRequestMarshaller(new Bytes()).setResponseMarshaller(new Bytes()).build();

    private EmbeddedCluster cluster;

    @RegisterExtension
    final PrintClusterOnFailure printCountersOnFailure = new PrintClusterOnFailure(() -> cluster);

    @AfterEach
    void stop() {
        if (cluster != null) {
            cluster.close();
        }
    }

    @Test
    void fuzzedBatchesFromAConnectedPeerBreakNothingAndTheNodeServesOthersAfter() throws Exception {
        long seed = Long.getLong("pagewire.fuzz.seed", System.nanoTime());
        int batches = Integer.getInteger("pagewire.fuzz.batches", 50_000);
        System.out.println("FabricFuzzTest: seed " + seed + ", " + batches + " batches (replay: -Dpagewire.fuzz.seed=" + seed + ")");
        cluster = EmbeddedCluster.start(2, Transport.NETTY, c -> {
            c.acceptPeer(FUZZER);
            c.kernel().physicalMemoryBytes(16L << 20).swapBytes(32L << 20);
            // Patient requesters: the victim's pairs towards the fuzzer should live through a phase, not time out in it.
            c.nic().ackTimeoutNs(2_000_000_000L).retryCount(7).rnrRetryCount(7);
        });
        PagewireNode victim = cluster.node(1);
        TestbedCertificates.Issued fuzzerIdentity = TestbedCertificates.in(cluster.certificates()).issueNode(FUZZER, List.of());

        try (Pagewire app = Pagewire.connect(victim.target(), cluster.connectOptions())) {
            ManagedChannel channel = GrpcPagewire.channelBuilder(victim.target(), new ClientSecurity(
                    fuzzerIdentity.caFile(), fuzzerIdentity.certificateFile(), fuzzerIdentity.privateKeyFile(), "node-1", "")).build();
            try (LogLines log = new LogLines()) {
                SplittableRandom random = new SplittableRandom(seed);
                Map<String, Long> answers = new TreeMap<>();
                // The fuzzer's first lane makes it a linked peer, so the victim's queue pairs can be connected to it.
                FuzzLane first = FuzzLane.open(channel, answers);
                Endpoint endpoint = app.openEndpoint("fuzz-target");
                List<MemoryRegion> regions = Targets.regions(endpoint);
                long packets = 0;
                int garbageLanes = 0;
                for (int phase = 0; phase < PHASES; phase++) {
                    FuzzLane lane = phase == 0 ? first : FuzzLane.open(channel, answers);
                    // Fresh queue pairs each phase: a forged request ends the pair it reaches, as an invalid request does in RC.
                    Targets targets = Targets.on(endpoint, regions, 1000 + 16 * phase);
                    for (int i = phase * batches / PHASES; i < (phase + 1) * batches / PHASES; i++) {
                        PacketBatch batch = batch(random, targets);
                        packets += batch.getPacketsCount();
                        lane.send(LaneFrame.newBuilder().setBatch(batch).build());
                    }
                    lane.close();
                    targets.pairs().forEach(QueuePair::close);
                    Status garbage = sendGarbage(channel, random);
                    garbageLanes++;
                    assertThat(garbage.getCode()).as("unparsable lane bytes get a clear status").isIn(Status.Code.INVALID_ARGUMENT,
                            Status.Code.UNAVAILABLE);
                    assertServing(victim, "after phase " + phase);
                }
                System.out.printf("FabricFuzzTest: seed %d: %d batches, %d packets, %d garbage lanes; the victim answered %s%n", seed, batches,
                        packets, garbageLanes, answers);
                System.out.println("FabricFuzzTest: the victim's NIC counters:\n" + victim.nic().counters());
                assertThat(victim.fabric().batchesFailed()).as("batches that threw in the victim's NIC (see its log)").isZero();
                assertThat(victim.nic().counters().get(NicCounter.TIMER_TASK_FAILURES)).as("NIC timer tasks that threw").isZero();
                assertThat(victim.nic().counters().get(NicCounter.PIN_ACCOUNTING_ERRORS)).as("pin accounting errors").isZero();
                // Bad input is the peer's: a few lines (a peer's garbage lanes are one line per 10 s), never a stack trace.
                assertThat(log.withStackTraces()).as("stack traces logged").isEmpty();
                assertThat(log.count()).as("log lines for %d fuzzed batches and %d garbage lanes:\n%s", batches, garbageLanes, log.sample())
                        .isLessThanOrEqualTo(20 * Math.max(1, batches / 10_000));
            } finally {
                channel.shutdownNow();
            }
        }
    }

    /** Health SERVING, and a write from node-2 to node-1 lands byte for byte. */
    private void assertServing(PagewireNode victim, String when) throws Exception {
        ManagedChannel channel = cluster.openChannel(victim);
        try {
            assertThat(HealthGrpc.newBlockingStub(channel).withDeadlineAfter(10, TimeUnit.SECONDS).check(HealthCheckRequest.getDefaultInstance())
                    .getStatus()).as(when).isEqualTo(HealthCheckResponse.ServingStatus.SERVING);
        } finally {
            channel.shutdownNow();
        }
        ServiceChecks.assertWriteLands(cluster, 2, 1, when);
    }

    /**
     * The victim's queue pairs connected to the fuzzer (with work in flight towards it and a receive
     * posted), its regions in every mode, and the PSN each pair's responder expects next as far as
     * the fuzzer knows (it advances when a well-formed request goes unmutated).
     */
    private record Targets(List<QueuePair> pairs, List<Integer> qpns, List<Integer> fuzzerQpns, List<Long> addresses, List<Long> rkeys, long[] nextPsn) {
        static List<MemoryRegion> regions(Endpoint endpoint) {
            List<MemoryRegion> regions = new ArrayList<>();
            for (RegistrationMode mode : RegistrationMode.values()) {
                long address = endpoint.allocate(64 << 10);
                regions.add(endpoint.register(address, 64 << 10, mode, Access.all()));
            }
            return regions;
        }

        static Targets on(Endpoint endpoint, List<MemoryRegion> regions, int firstFuzzerQpn) {
            List<QueuePair> pairs = new ArrayList<>();
            List<Integer> qpns = new ArrayList<>();
            List<Integer> fuzzerQpns = new ArrayList<>();
            List<Long> addresses = regions.stream().map(MemoryRegion::address).toList();
            List<Long> rkeys = regions.stream().map(MemoryRegion::rkey).toList();
            for (int i = 0; i < 6; i++) {
                QueuePair qp = endpoint.createQueuePair();
                pairs.add(qp);
                int fuzzerQpn = firstFuzzerQpn + i;
                qp.connect(new QpAddress(FUZZER, fuzzerQpn, 64, 4096));
                MemoryRegion region = regions.get(i % regions.size());
                qp.postReceive(region, region.address(), 8192);
                // Work in flight towards the fuzzer, so that its forged acknowledgements and responses meet a requester.
                qp.write(region, region.address(), 4096, 0x1000, 7);
                qp.read(region, region.address() + 8192, 4096, 0x1000, 7);
                qpns.add(qp.address().qpn());
                fuzzerQpns.add(fuzzerQpn);
            }
            return new Targets(pairs, qpns, fuzzerQpns, addresses, rkeys, new long[qpns.size()]);
        }
    }

    private static PacketBatch batch(SplittableRandom random, Targets targets) {
        PacketBatch.Builder batch = PacketBatch.newBuilder();
        int n = 1 + random.nextInt(8);
        for (int i = 0; i < n; i++) {
            batch.addPackets(packet(random, targets));
        }
        return batch.build();
    }

    /** Half well-formed requests at the PSN their pair expects (a third of them with one field broken), half anything. */
    private static Packet packet(SplittableRandom random, Targets targets) {
        return random.nextBoolean() ? mutated(random, targets) : anything(random, targets);
    }

    private static Packet mutated(SplittableRandom random, Targets targets) {
        int target = random.nextInt(targets.qpns().size());
        int region = random.nextInt(targets.addresses().size());
        long address = targets.addresses().get(region) + 8L * random.nextInt(1024);
        Packet.Builder p = Packet.newBuilder().setDstQpn(targets.qpns().get(target)).setSrcQpn(targets.fuzzerQpns().get(target))
                .setPsn(targets.nextPsn()[target]).setRemoteAddress(address).setRkey(targets.rkeys().get(region));
        switch (random.nextInt(4)) {
            case 0 -> p.setOpcode(Opcode.WRITE_ONLY).setPayload(ByteString.copyFrom(bytes(random, 1 + random.nextInt(4096))));
            case 1 -> p.setOpcode(Opcode.SEND_ONLY).setPayload(ByteString.copyFrom(bytes(random, 1 + random.nextInt(4096))));
            case 2 -> p.setOpcode(Opcode.READ_REQUEST).setLength(1 + random.nextInt(4096));
            default -> p.setOpcode(Opcode.FETCH_ADD).setAdd(random.nextLong());
        }
        if (random.nextInt(3) == 0) {
            switch (random.nextInt(7)) {
                case 0 -> p.setRemoteAddress(edge(random));
                case 1 -> p.setRkey(edge(random));
                case 2 -> p.setLength((int) edge(random));
                case 3 -> p.setPayload(ByteString.copyFrom(bytes(random, 4097 + random.nextInt(8192))));
                case 4 -> p.setOpcodeValue(18 + random.nextInt(1000));
                case 5 -> p.setCounterId((int) edge(random)).setOpcode(Opcode.WRITE_ONLY_WITH_NOTIFY);
                default -> p.setRemoteAddress(address + 1 + random.nextInt(7));
            }
        } else {
            targets.nextPsn()[target]++;
        }
        return p.build();
    }

    private static byte[] bytes(SplittableRandom random, int n) {
        byte[] bytes = new byte[n];
        random.nextBytes(bytes);
        return bytes;
    }

    /** Every field aimed at a real target, an edge value or anything. */
    private static Packet anything(SplittableRandom random, Targets targets) {
        Packet.Builder p = Packet.newBuilder();
        int target = random.nextInt(targets.qpns().size());
        p.setDstQpn(random.nextInt(10) < 7 ? targets.qpns().get(target) : (int) edge(random));
        p.setSrcQpn(random.nextInt(10) < 8 ? targets.fuzzerQpns().get(target) : (int) edge(random));
        p.setPsn(random.nextInt(10) < 6 ? random.nextInt(16) : edge(random));
        if (random.nextInt(10) < 9) {
            p.setOpcodeValue(random.nextInt(18));
        } else {
            p.setOpcodeValue((int) edge(random));
        }
        int region = random.nextInt(targets.addresses().size());
        if (random.nextBoolean()) {
            p.setRemoteAddress(targets.addresses().get(region) + (random.nextBoolean() ? random.nextInt(64 << 10) : edge(random)));
        } else if (random.nextBoolean()) {
            p.setRemoteAddress(edge(random));
        }
        if (random.nextInt(10) < 6) {
            p.setRkey(targets.rkeys().get(region));
        } else if (random.nextBoolean()) {
            p.setRkey(edge(random));
        }
        if (random.nextBoolean()) {
            p.setLength((int) edge(random));
        }
        int payload = switch (random.nextInt(6)) {
            case 0 -> 0;
            case 1 -> 4096;
            case 2 -> 4097;
            case 3 -> 3 * 4096;
            default -> random.nextInt(4097);
        };
        if (payload > 0) {
            byte[] bytes = new byte[payload];
            random.nextBytes(bytes);
            p.setPayload(ByteString.copyFrom(bytes));
        }
        if (random.nextBoolean()) {
            p.setCounterId((int) edge(random));
        }
        if (random.nextBoolean()) {
            p.setAdd(edge(random)).setSwap(edge(random));
        }
        if (random.nextInt(3) == 0) {
            p.setSyndromeValue(random.nextInt(10) < 8 ? random.nextInt(8) : (int) edge(random));
            p.setAckPsn(random.nextBoolean() ? random.nextInt(16) : edge(random));
            p.setCreditLimit(edge(random));
            p.setRnrDelayNs(edge(random));
            p.setAtomicResult(edge(random));
        }
        if (random.nextInt(20) == 0) {
            p.setError("x".repeat(random.nextInt(100_000)));
        }
        if (random.nextBoolean()) {
            p.setImmediate((int) edge(random));
        }
        return p.build();
    }

    private static long edge(SplittableRandom random) {
        return switch (random.nextInt(12)) {
            case 0 -> 0;
            case 1 -> 1;
            case 2 -> -1;
            case 3 -> Long.MAX_VALUE;
            case 4 -> Long.MIN_VALUE;
            case 5 -> Integer.MAX_VALUE;
            case 6 -> 0xFFFF_FFFFL;
            case 7 -> 0x8000_0000L;
            case 8 -> (1L << 63) + random.nextInt(1000);
            case 9 -> random.nextInt(1 << 20);
            case 10 -> -random.nextInt(4096);
            default -> random.nextLong();
        };
    }

    /** A lane of random bytes that are not a LaneFrame; the status the node ends it with. */
    private static Status sendGarbage(ManagedChannel channel, SplittableRandom random) throws Exception {
        CompletableFuture<Status> ended = new CompletableFuture<>();
        StreamObserver<byte[]> out = ClientCalls.asyncBidiStreamingCall(channel.newCall(RAW_LANE, CallOptions.DEFAULT), new StreamObserver<>() {
            @Override
            public void onNext(byte[] value) {
            }

            @Override
            public void onError(Throwable t) {
                ended.complete(Status.fromThrowable(t));
            }

            @Override
            public void onCompleted() {
                ended.complete(Status.OK);
            }
        });
        byte[] garbage = new byte[1 + random.nextInt(2000)];
        random.nextBytes(garbage);
        garbage[0] = (byte) 0xFF; // field 31, wire type 7: never valid protobuf
        out.onNext(garbage);
        Status status = ended.get(15, TimeUnit.SECONDS);
        out.onCompleted();
        return status;
    }

    /** The fuzzer's lane, said hello on as node-3: sends with flow control, counts what the victim answers by opcode and syndrome. */
    private static final class FuzzLane {
        private final ClientCallStreamObserver<LaneFrame> out;
        private final CompletableFuture<Void> helloBack;
        private final CompletableFuture<Status> ended = new CompletableFuture<>();
        private final Object readiness = new Object();

        private FuzzLane(ManagedChannel channel, Map<String, Long> answers) {
            CompletableFuture<ClientCallStreamObserver<LaneFrame>> requests = new CompletableFuture<>();
            helloBack = new CompletableFuture<>();
            FabricGrpc.newStub(channel).lane(new ClientResponseObserver<LaneFrame, LaneFrame>() {
                @Override
                public void beforeStart(ClientCallStreamObserver<LaneFrame> stream) {
                    stream.setOnReadyHandler(() -> {
                        synchronized (readiness) {
                            readiness.notifyAll();
                        }
                    });
                    requests.complete(stream);
                }

                @Override
                public void onNext(LaneFrame frame) {
                    if (frame.hasHello()) {
                        helloBack.complete(null);
                        return;
                    }
                    synchronized (answers) {
                        for (Packet p : frame.getBatch().getPacketsList()) {
                            answers.merge(p.getOpcode() + (p.getSyndromeValue() == 0 ? "" : "/" + p.getSyndrome()), 1L, Long::sum);
                        }
                    }
                }

                @Override
                public void onError(Throwable t) {
                    ended.complete(Status.fromThrowable(t));
                    helloBack.completeExceptionally(t);
                }

                @Override
                public void onCompleted() {
                    ended.complete(Status.OK);
                }
            });
            out = requests.join();
        }

        static FuzzLane open(ManagedChannel channel, Map<String, Long> answers) throws Exception {
            FuzzLane lane = new FuzzLane(channel, answers);
            lane.out.onNext(LaneFrame.newBuilder().setHello(LaneHello.newBuilder().setNodeId(FUZZER).setLaneIndex(0).setIncarnation(7)).build());
            lane.helloBack.get(15, TimeUnit.SECONDS);
            return lane;
        }

        /** Sends once the stream is ready; a victim that stops reading for 20 s fails the test (a hang). */
        void send(LaneFrame frame) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            synchronized (readiness) {
                while (!out.isReady()) {
                    assertThat(ended.isDone()).as("the victim ended the fuzzer's lane: " + ended.getNow(null)).isFalse();
                    long left = deadline - System.nanoTime();
                    assertThat(left).as("the victim stopped reading the fuzzer's lane").isPositive();
                    readiness.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                }
            }
            assertThat(ended.isDone()).as("the victim ended the fuzzer's lane: " + ended.getNow(null)).isFalse();
            out.onNext(frame);
        }

        void close() throws Exception {
            out.onCompleted();
            ended.get(15, TimeUnit.SECONDS);
        }
    }

    /** Bytes as they are. */
    private static final class Bytes implements MethodDescriptor.Marshaller<byte[]> {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    }
}
